package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
	cl := &clients{WithWatch: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(&cannot, &running).Build(), namespace: "team-a"}
	cases := map[string]struct {
		name     string
		want     api.Phase
		timeout  time.Duration
		code     int
		contains []string
	}{
		"can never start: 6 with the next steps": {name: "fpga", want: api.PhaseRunning, timeout: 10 * time.Second, code: ExitOtherPhase,
			contains: []string{"job fpga can never reach Running: CannotStart: The job can never start", "1. Check the resource name example.com/fpga.", "2. Or ask an administrator."}},
		"waiting for its own phase is fine": {name: "fpga", want: api.PhaseQueued, timeout: 10 * time.Second},
		"timeout: 7":                        {name: "slow", want: api.PhaseSucceeded, timeout: 1500 * time.Millisecond, code: ExitTimeout, contains: []string{"did not reach Succeeded within 1.5s; it is Running"}},
		"no such job: 3":                    {name: "slwo", want: api.PhaseRunning, timeout: 10 * time.Second, code: ExitNotFound, contains: []string{`did you mean "slow"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			o := &Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}
			err := waitFor(context.Background(), cl, o, tc.name, tc.want, tc.timeout)
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

func TestNotStartedYet(t *testing.T) {
	waiting := apierrors.NewBadRequest(`container "node" in pod "hello-launcher-0-0-x" is waiting to start: ContainerCreating`)
	if !notStartedYet(waiting) {
		t.Error("a container waiting to start is not recognised")
	}
	if notStartedYet(apierrors.NewBadRequest("a container name must be specified")) || notStartedYet(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")) {
		t.Error("other errors must not be waited on")
	}
}
