package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
)

// describe hides a secret in the job's command as logs does: viewers of
// the job see its command.
func TestDescribeRedactsTheCommand(t *testing.T) {
	tj := testJob("team-a", "s3", "mpi-openmpi", 1, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	tj.Spec.Trainer.Command = []string{"sh", "-c"}
	tj.Spec.Trainer.Args = []string{"AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP aws s3 cp s3://b/x . && mpirun train"}
	rt := shippedRuntime(t, "mpi-openmpi")
	tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "DB_PASSWORD", Value: "hunter2hunter2"},
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "api"}, Key: "token"}}}}
	o, out, _ := fakeOptions(t, interceptor.Funcs{}, &tj, rt)
	d := &describeOptions{Options: o, name: "s3", now: func() time.Time { return now }}
	if err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The environment: values redacted, a Secret's key named, never its value.
	for _, want := range []string{"Env:", "DB_PASSWORD=[REDACTED]", "TOKEN from Secret api, key token"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("describe prints a password:\n%s", out.String())
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
