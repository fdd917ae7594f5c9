package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
)

// describe hides a secret in the job's command as logs does: viewers of
// the job see its command.
func TestDescribeRedactsTheCommand(t *testing.T) {
	tj := testJob("team-a", "s3", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	tj.Spec.Trainer.Command = []string{"sh", "-c"}
	tj.Spec.Trainer.Args = []string{"AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP aws s3 cp s3://b/x . && mpirun train"}
	raw, err := config.Runtimes.ReadFile("runtimes/mpi-openmpi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := yaml.UnmarshalStrict(raw, rt); err != nil {
		t.Fatal(err)
	}
	cl := &clients{WithWatch: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(&tj, rt).Build(), namespace: "team-a"}
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
	// Limits as well as requests (the runtime's Worker: 100m/128Mi, 1/1Gi).
	if !strings.Contains(out.String(), "1 × requests cpu=100m,memory=128Mi; limits cpu=1,memory=1Gi") {
		t.Errorf("describe lacks the Workers' requests and limits:\n%s", out.String())
	}
}
