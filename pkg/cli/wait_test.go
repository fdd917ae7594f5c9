package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
)

// wait ends as its help says: 6 for a job that can never start (with the
// ranked next steps), 7 for the timeout, 3 for no such job; never the
// client's own error text.
func TestWaitExitCodes(t *testing.T) {
	cannot := testJob("team-a", "fpga", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseQueued, Reason: "CannotStart",
		Message:   "The job can never start: queue team-a/default has no quota for example.com/fpga.",
		NextStep:  "Check the resource name example.com/fpga.",
		NextSteps: []string{"Check the resource name example.com/fpga.", "Or ask an administrator."}}, time.Minute)
	running := testJob("team-a", "slow", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	cases := map[string]struct {
		name     string
		want     api.Phase
		timeout  time.Duration
		code     int
		contains []string
	}{
		"a phase that is none: 2": {name: "slow", want: "Done", timeout: time.Second, code: ExitUsage, contains: []string{`--for "Done"`}},
		"no timeout: 2":           {name: "slow", want: api.PhaseRunning, code: ExitUsage, contains: []string{"--timeout 0s"}},
		"can never start: 6 with the next steps": {name: "fpga", want: api.PhaseRunning, timeout: 10 * time.Second, code: ExitOtherPhase,
			contains: []string{"job fpga can never reach Running: CannotStart: The job can never start", "1. Check the resource name example.com/fpga.", "2. Or ask an administrator."}},
		"waiting for its own phase is fine": {name: "fpga", want: api.PhaseQueued, timeout: 10 * time.Second},
		"timeout: 7":                        {name: "slow", want: api.PhaseSucceeded, timeout: 1500 * time.Millisecond, code: ExitTimeout, contains: []string{"did not reach Succeeded within 1.5s; it is Running"}},
		"no such job: 3":                    {name: "slwo", want: api.PhaseRunning, timeout: 10 * time.Second, code: ExitNotFound, contains: []string{`did you mean "slow"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, _, _ := fakeOptions(t, interceptor.Funcs{}, &cannot, &running)
			w := &waitOptions{Options: o, forPhase: string(tc.want), timeout: tc.timeout}
			w.Complete([]string{tc.name})
			err := w.Validate()
			if err == nil {
				err = w.Run(context.Background())
			}
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("err %v, want none", err)
				}
				return
			}
			var exit *exitError
			if !errors.As(err, &exit) || exit.code != tc.code {
				t.Fatalf("err %v, want exit code %d", err, tc.code)
			}
			for _, c := range tc.contains {
				if !strings.Contains(exit.msg, c) {
					t.Errorf("message %q lacks %q", exit.msg, c)
				}
			}
		})
	}
}
