package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/stacks"
)

// Bad input and jobs that have no ranks to look at are refused with the
// reason and what to run instead; nothing reaches a pod.
func TestStacksRefuses(t *testing.T) {
	done := fakeJob("trained")
	enc, err := api.Status{Phase: api.PhaseSucceeded}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	done.Annotations = map[string]string{api.StatusAnnotation: enc}
	cases := map[string]struct {
		name, output string
		code         int
		want         string
	}{
		"an output it cannot print": {name: "hello", output: "yaml", code: ExitUsage, want: `--output "yaml": stacks prints text, or json`},
		"a typo in the name":        {name: "helo", code: ExitNotFound, want: `MPI job "helo" not found in namespace team-a: did you mean "hello"?`},
		"a finished job":            {name: "trained", code: ExitOtherPhase, want: "job trained is Succeeded: stacks shows where a running job's ranks are (its output: kubectl mpijob logs trained)"},
		"a job with no pods yet":    {name: "hello", code: ExitOtherPhase, want: "job hello has no running pod now"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, _, _ := fakeOptions(t, interceptor.Funcs{}, fakeJob("hello"), done)
			s := &stacksOptions{Options: o, name: tc.name, output: tc.output}
			err := s.Validate()
			if err == nil {
				err = s.Run(context.Background())
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != tc.code || !strings.Contains(ee.msg, tc.want) {
				t.Fatalf("got %v, want exit %d with %q", err, tc.code, tc.want)
			}
		})
	}
}

// The groups print as headline, frames with their code, where the ranks
// run, and the sentence that contrasts them.
func TestPrintGroups(t *testing.T) {
	allreduce := []stacks.Frame{
		{File: "/opt/train.py", Line: 120, Func: "step", Source: "comm.Allreduce(a, b)"},
		{File: "/opt/train.py", Line: 200, Func: "<module>", Source: "step()"},
	}
	recv := []stacks.Frame{{File: "/opt/train.py", Line: 88, Func: "load_batch", Source: "msg = comm.recv(source=0)"}}
	var ranks []stacks.Rank
	for r := 0; r < 4; r++ {
		ranks = append(ranks, stacks.Rank{Rank: r, Pod: stacks.Pod{Name: "w", Worker: r / 2, Node: "n1"}, State: "running", Hook: true, Frames: allreduce})
	}
	ranks[3].Frames, ranks[3].State = recv, "sleeping"
	groups := stacks.GroupRanks(ranks)
	var out bytes.Buffer
	printGroups(&out, stacks.Result{Ranks: ranks, Groups: groups, Contrast: stacks.Contrast(groups)})
	want := `ranks 0-2 (3): comm.Allreduce ← train.py:120 step() ← train.py:200 <module>
    train.py:120 step()    comm.Allreduce(a, b)
    train.py:200 <module>  step()
    running, on Workers 0-1 (node n1)

rank 3 on Worker 1: comm.recv ← train.py:88 load_batch()
    train.py:88 load_batch()  msg = comm.recv(source=0)
    sleeping, on Worker 1 (node n1)

Rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("stacks (-want +got):\n%s", diff)
	}
}
