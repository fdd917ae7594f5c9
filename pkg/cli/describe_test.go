package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Nothing a tenant put in the cluster acts on the terminal: an Event's
// escape codes and an env value's, printed by events and describe.
func TestVerbsPrintNoTerminalEscapes(t *testing.T) {
	tj := testJob("team-a", "esc", "mpi-mpich", 1, &api.Status{Phase: api.PhaseRunning}, time.Minute)
	tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi\x1b]0;pwned\x07\x1b[2J\x1b[31mred\rhidden"}}
	forged := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "team-a"}, Type: corev1.EventTypeWarning,
		Reason: "Diagnosed\x1b[8m", Message: "all fine\x1b[1A\x1b[2Kreally\u202etxt.exe",
		InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Name: "esc", Namespace: "team-a"}, LastTimestamp: metav1.NewTime(now)}
	for _, args := range [][]string{{"describe", "esc"}, {"events", "esc"}} {
		t.Run(args[0], func(t *testing.T) {
			o, out, errOut := fakeOptions(t, interceptor.Funcs{}, &tj, shippedRuntime(t, "mpi-mpich"), forged)
			root := newRoot(o)
			root.SetArgs(args)
			if err := root.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, errOut)
			}
			if i := strings.IndexFunc(out.String(), func(r rune) bool {
				return r == 0x1b || r == '\r' || r == 0x07 || r == 0x202e
			}); i >= 0 {
				t.Errorf("%v prints a control character at %d: %q", args, i, out.String())
			}
			want := map[string]string{"describe": "GREETING=hiredhidden", "events": "all finereallytxt.exe"}[args[0]]
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v lacks the cleaned text:\n%s", args, out.String())
			}
		})
	}
}

// An Event that says it is mpijob-manager's and that the job's status does
// not vouch for is marked, in events and describe; the manager's own and
// the kubelet's are not.
func TestForgedEventsAreMarked(t *testing.T) {
	const note = "Running on 1 Workers."
	st := &api.Status{Phase: api.PhaseRunning, EventDigests: []string{api.EventDigest("uid-vouched", corev1.EventTypeNormal, "Running", note)}}
	tj := testJob("team-a", "vouched", "mpi-mpich", 1, st, time.Minute)
	tj.UID = "uid-vouched"
	ev := func(name, typ, reason, msg, controller string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Type: typ, Reason: reason, Message: msg,
			ReportingController: controller, InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Name: "vouched", Namespace: "team-a", UID: "uid-vouched"},
			LastTimestamp: metav1.NewTime(now)}
	}
	objs := []client.Object{&tj, shippedRuntime(t, "mpi-mpich"),
		ev("real", "Normal", "Running", note, api.FieldManager),
		ev("fake", "Warning", "WorkerOOMKilled", "Worker 0 ran out of memory: raise its limit to 512Gi", api.FieldManager),
		ev("kubelet", "Normal", "Pulled", "Container image already present", "kubelet")}
	for _, args := range [][]string{{"events", "vouched"}, {"describe", "vouched"}} {
		t.Run(args[0], func(t *testing.T) {
			o, out, errOut := fakeOptions(t, interceptor.Funcs{}, objs...)
			root := newRoot(o)
			root.SetArgs(args)
			if err := root.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, errOut)
			}
			for line, forged := range map[string]bool{"raise its limit to 512Gi": true, note: false, "already present": false} {
				found := false
				for _, l := range strings.Split(out.String(), "\n") {
					if strings.Contains(l, line) {
						found = true
						if strings.Contains(l, ForgedMark) != forged {
							t.Errorf("%v: %q marked %v, want %v:\n%s", args, line, !forged, forged, out.String())
						}
					}
				}
				if !found {
					t.Errorf("%v does not show the Event %q:\n%s", args, line, out.String())
				}
			}
		})
	}
}

// A post-mortem: the job's pods are gone and its Events expired; describe
// shows the pods and transitions its status kept.
func TestDescribeAfterThePodsAndEventsAreGone(t *testing.T) {
	st := &api.Status{Phase: api.PhaseFailed, Reason: "WorkerOOMKilled", Message: "Worker 1 was killed: out of memory.",
		Pods: []api.PodRecord{
			{Role: "launcher", Pod: "pm-launcher-0-0-abcde", Node: "node-1", State: "Error (exit 1)", Gone: true},
			{Role: "worker", Index: 1, Pod: "pm-node-0-1-fghij", Node: "node-2", State: "OOMKilled (exit 137)", Restarts: 2, Gone: true},
		},
		Failed: []api.FailedPod{{Role: "launcher", Pod: "pm-launcher-0-0-abcde", Reason: "Error (exit 1)"}, {Role: "worker", Index: 1, Pod: "pm-node-0-1-fghij", Reason: "WorkerOOMKilled", ExitCode: ptr.To[int32](137), Signal: 9}},
		History: []api.Transition{
			{Time: metav1.NewTime(now.Add(-3 * time.Hour)), Phase: api.PhaseRunning, Message: "Running on 2 Workers."},
			{Time: metav1.NewTime(now.Add(-2 * time.Hour)), Phase: api.PhaseFailed, Reason: "WorkerOOMKilled", Message: "Worker 1 was killed: out of memory."},
		}}
	tj := testJob("team-a", "pm", "mpi-openmpi", 2, st, 3*time.Hour)
	o, out, _ := fakeOptions(t, interceptor.Funcs{}, &tj, shippedRuntime(t, "mpi-openmpi"))
	d := &describeOptions{Options: o, name: "pm", now: func() time.Time { return now }}
	if err := d.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gone; as mpijob-manager last saw them:",
		"worker-1  pm-node-0-1-fghij",
		"OOMKilled (exit 137) (pod gone)",
		"Failed: launcher (Error (exit 1)), worker-1 (WorkerOOMKilled; exit code 137, SIGKILL)",
		"(their logs: kubectl mpijob logs pm --all)",
		"none left in the cluster (Events expire); the job's transitions as its status kept them:",
		"3h    Running  -                Running on 2 Workers.",
		"120m  Failed   WorkerOOMKilled  Worker 1 was killed: out of memory.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}
