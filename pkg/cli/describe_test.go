package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mpijob/mpijob/pkg/api"
)

// describe hides a secret in the job's command as logs does: viewers of
// the job see its command.
func TestDescribeRedactsTheCommand(t *testing.T) {
	tj := testJob("team-a", "s3", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	tj.Spec.Trainer.Command = []string{"sh", "-c"}
	tj.Spec.Trainer.Args = []string{"AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP aws s3 cp s3://b/x . && mpirun train"}
	cl := &clients{WithWatch: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(&tj).Build(), namespace: "team-a"}
	var out bytes.Buffer
	if err := describe(context.Background(), cl, "s3", &out, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "AKIAABCDEFGHIJKLMNOP") {
		t.Errorf("describe prints the access key id:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "AWS_ACCESS_KEY_ID=[REDACTED] aws s3 cp s3://b/x . && mpirun train") {
		t.Errorf("describe lacks the redacted command:\n%s", out.String())
	}
}
