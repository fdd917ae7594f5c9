package runtimetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/config"
	"github.com/mpijob/mpijob/pkg/api"
)

// A fake cluster where the test job, once created, already has the
// manager's status st and the given pods (a job that finished at once).
func finishedCluster(t *testing.T, st api.Status, createErr error, pods ...corev1.Pod) (client.Client, *[]string) {
	t.Helper()
	var deleted []string
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if createErr != nil {
				return createErr
			}
			enc, err := st.Encode()
			if err != nil {
				return err
			}
			obj.SetAnnotations(map[string]string{api.StatusAnnotation: enc})
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			for i := range pods {
				p := pods[i].DeepCopy()
				p.Namespace = obj.GetNamespace()
				p.Labels[jobsetv1alpha2.JobSetNameKey] = obj.GetName()
				if err := c.Create(ctx, p); err != nil {
					return err
				}
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deleted = append(deleted, obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return c, &deleted
}

func rolePod(name, role string, statuses ...corev1.ContainerStatus) corev1.Pod {
	p := testPod(name, statuses...)
	p.Labels = map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: role}
	p.Spec.Hostname = name
	return p
}

func TestRun(t *testing.T) {
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("a runtime that passes", func(t *testing.T) {
		c, deleted := finishedCluster(t, api.Status{Phase: api.PhaseSucceeded}, nil,
			rolePod("launcher", api.LauncherJob, readyNode), rolePod("w-0", api.WorkerJob, readyNode), rolePod("w-1", api.WorkerJob, readyNode))
		var seen []Progress
		log := func(_ context.Context, ns, pod string) (string, error) {
			if pod != "launcher" || ns != "team-a" {
				return "", errors.New("not the Launcher")
			}
			return "rank 0 of 2 on w-0\nrank 1 of 2 on w-1\n", nil
		}
		p, err := Run(ctx, c, "team-a", rt, Options{Timeout: time.Minute, Progress: func(p Progress) { seen = append(seen, p) }, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Done || p.Phase != api.PhaseSucceeded || p.Failed() || !strings.HasPrefix(p.Job, "rt-test-") {
			t.Errorf("progress %+v, want a finished test that passed", p)
		}
		want := []string{"image pull", "SSH key mount", "MPI spawn", "rank placement"}
		for i, ch := range p.Checks {
			if i >= len(want) || ch.Name != want[i] || ch.Result != Pass {
				t.Errorf("check %d = %+v, want %s passed", i, ch, want[min(i, len(want)-1)])
			}
		}
		if len(seen) < 2 || seen[0].Done || !seen[len(seen)-1].Done {
			t.Errorf("progress was told %d times; want the first look and the final one", len(seen))
		}
		if len(*deleted) != 1 || (*deleted)[0] != p.Job {
			t.Errorf("deleted %v, want the test job", *deleted)
		}
	})
	t.Run("a runtime whose job fails, kept", func(t *testing.T) {
		c, deleted := finishedCluster(t, api.Status{Phase: api.PhaseFailed, Reason: "LauncherFailed", Message: "mpirun could not start"}, nil)
		p, err := Run(ctx, c, "team-a", rt, Options{Timeout: time.Minute, Keep: true})
		if err != nil {
			t.Fatal(err)
		}
		spawn := p.Checks[2]
		if !p.Failed() || spawn.Result != Fail || spawn.Detail != "LauncherFailed: mpirun could not start" {
			t.Errorf("checks %+v, want MPI spawn failed with the diagnosis", p.Checks)
		}
		if len(*deleted) != 0 {
			t.Errorf("deleted %v with Keep", *deleted)
		}
	})
	t.Run("the user may not create jobs", func(t *testing.T) {
		c, _ := finishedCluster(t, api.Status{}, apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, "", errors.New("no")))
		if _, err := Run(ctx, c, "team-a", rt, Options{Timeout: time.Minute}); !apierrors.IsForbidden(err) {
			t.Errorf("Run: %v, want the API server's refusal", err)
		}
	})
	t.Run("not an MPI runtime", func(t *testing.T) {
		torch := rt.DeepCopy()
		torch.Name, torch.Spec.MLPolicy.MPI = "torch", nil
		if _, err := Run(ctx, nil, "team-a", torch, Options{}); err == nil || !strings.Contains(err.Error(), "runtime torch is not an MPI runtime") {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestPlacementCheckReadsTheLauncher(t *testing.T) {
	rt, err := config.Runtime("mpi-openmpi")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := &observed{launcher: rolePod("launcher", api.LauncherJob), workerHosts: sets.New("w-0", "w-1")}
	read := func(log string, err error) func(context.Context, string, string) (string, error) {
		return func(context.Context, string, string) (string, error) { return log, err }
	}
	cases := map[string]struct {
		o      *observed
		log    string
		err    error
		result string
		detail string
	}{
		"ranks on the Workers":        {o: o, log: "rank 0 of 2 on w-0\nrank 1 of 2 on w-1\n", result: Pass, detail: "2 ranks ran on the job's 2 rank hosts"},
		"a rank on the Launcher":      {o: o, log: "rank 0 of 2 on launcher\nrank 1 of 2 on w-1\n", result: Fail},
		"no placement lines":          {o: o, log: "hello\n", result: Skip},
		"the log cannot be read":      {o: o, err: errors.New("forbidden"), result: Fail, detail: "cannot read the Launcher's log: forbidden"},
		"the Launcher was never seen": {o: &observed{}, result: Fail, detail: "the Launcher pod was not seen"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.o.placementCheck(ctx, read(tc.log, tc.err), rt, "team-a")
			if got.Result != tc.result || !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("placementCheck = %+v, want %s with %q", got, tc.result, tc.detail)
			}
		})
	}
}

// The image builder's own Events on a job's pods, read directly: its last
// word counts, and only for the job's pods.
func TestBuilderSays(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 28, 4, 0, s, 0, time.UTC)) }
	ev := func(name, pod, reason, msg string, s int) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Reason: reason, Message: msg, LastTimestamp: at(s),
			Source: corev1.EventSource{Component: api.ImageBuilderComponent}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "ns"}}
	}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "job-node-0-0"}}}
	cases := map[string]struct {
		events []*corev1.Event
		want   string
	}{
		"none":                  {},
		"building":              {events: []*corev1.Event{ev("a", "job-node-0-0", api.EventBuildingImage, "builds it", 1)}, want: "builds it"},
		"built after building":  {events: []*corev1.Event{ev("a", "job-node-0-0", api.EventBuildingImage, "builds it", 1), ev("b", "job-node-0-0", api.EventImageBuilt, "built", 2)}, want: "built"},
		"failed after building": {events: []*corev1.Event{ev("a", "job-node-0-0", api.EventBuildingImage, "builds it", 1), ev("b", "job-node-0-0", api.EventImageBuildFailed, "failed", 2)}},
		"another job's pod":     {events: []*corev1.Event{ev("a", "other-node-0-0", api.EventBuildingImage, "builds it", 1)}},
		"the kubelet's, not yours": {events: []*corev1.Event{func() *corev1.Event {
			e := ev("a", "job-node-0-0", api.EventBuildingImage, "x", 1)
			e.Source.Component = "kubelet"
			return e
		}()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(api.NewScheme())
			for _, e := range tc.events {
				b = b.WithObjects(e)
			}
			if got := builderSays(context.Background(), b.Build(), "ns", pods); got != tc.want {
				t.Errorf("builderSays = %q, want %q", got, tc.want)
			}
		})
	}
}
