package wake

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/api"
)

func TestChanged(t *testing.T) {
	base := func() *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Generation: 1, ResourceVersion: "1",
			Annotations: map[string]string{"mpijob.dev/status": "a", "trainer.opendatahub.io/trainerStatus": "p", "policy.mpijob.dev/progress-timeout": "5m"}}}
	}
	ignored := []string{"mpijob.dev/status", "trainer.opendatahub.io/"}
	cases := map[string]struct {
		change func(*trainer.TrainJob)
		want   bool
	}{
		"only the resourceVersion":      {func(tj *trainer.TrainJob) { tj.ResourceVersion = "2" }, false},
		"an ignored annotation":         {func(tj *trainer.TrainJob) { tj.Annotations["mpijob.dev/status"] = "b" }, false},
		"an ignored prefix":             {func(tj *trainer.TrainJob) { tj.Annotations["trainer.opendatahub.io/trainerStatus"] = "q" }, false},
		"an ignored annotation removed": {func(tj *trainer.TrainJob) { delete(tj.Annotations, "mpijob.dev/status") }, false},
		"another annotation":            {func(tj *trainer.TrainJob) { tj.Annotations["policy.mpijob.dev/progress-timeout"] = "1m" }, true},
		"another annotation added":      {func(tj *trainer.TrainJob) { tj.Annotations["mpijob.dev/rank-failure"] = "{}" }, true},
		"another annotation removed":    {func(tj *trainer.TrainJob) { delete(tj.Annotations, "policy.mpijob.dev/progress-timeout") }, true},
		"the spec":                      {func(tj *trainer.TrainJob) { tj.Generation = 2 }, true},
		"Trainer's conditions": {func(tj *trainer.TrainJob) {
			tj.Status.Conditions = []metav1.Condition{{Type: "Complete", Status: "True"}}
		}, true},
		"deletion":    {func(tj *trainer.TrainJob) { tj.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
		"a label":     {func(tj *trainer.TrainJob) { tj.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "q"} }, true},
		"a finalizer": {func(tj *trainer.TrainJob) { tj.Finalizers = []string{"x"} }, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, n := base(), base()
			tc.change(n)
			if got := Changed(o, n, ignored...); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
			if got := TrainJobChanged(ignored...).Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}); got != tc.want {
				t.Errorf("the predicate passes = %v, want %v", got, tc.want)
			}
		})
	}
	if !TrainJobChanged().Create(event.CreateEvent{Object: base()}) || !TrainJobChanged().Delete(event.DeleteEvent{Object: base()}) {
		t.Error("creates and deletes must pass")
	}
}

// The diagnosis wakes for a JobStatus when the stacks it keeps there change
// or when it is deleted (it writes it again): never for its own status
// writes or creates.
func TestStacksOrGone(t *testing.T) {
	js := func(status, stacks string) *api.JobStatus {
		return &api.JobStatus{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "team-a"}, Status: status, Stacks: stacks}
	}
	p := StacksOrGone()
	cases := map[string]struct {
		got  bool
		want bool
	}{
		"a status write":              {p.Update(event.UpdateEvent{ObjectOld: js("a", ""), ObjectNew: js("b", "")}), false},
		"a status write, stacks kept": {p.Update(event.UpdateEvent{ObjectOld: js("a", "s"), ObjectNew: js("b", "s")}), false},
		"stacks kept":                 {p.Update(event.UpdateEvent{ObjectOld: js("a", ""), ObjectNew: js("a", "s")}), true},
		"stacks taken again":          {p.Update(event.UpdateEvent{ObjectOld: js("a", "s"), ObjectNew: js("a", "t")}), true},
		"created":                     {p.Create(event.CreateEvent{Object: js("a", "s")}), false},
		"deleted":                     {p.Delete(event.DeleteEvent{Object: js("a", "s")}), true},
		"deleted, no stacks":          {p.Delete(event.DeleteEvent{Object: js("a", "")}), true},
		"another kind":                {p.Update(event.UpdateEvent{ObjectOld: &trainer.TrainJob{}, ObjectNew: &trainer.TrainJob{}}), false},
		"another kind deleted":        {p.Delete(event.DeleteEvent{Object: &trainer.TrainJob{}}), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// The progress controller wakes for a Launcher pod that is made, changes
// phase or goes; never for a Worker, a pod of no JobSet, or a Launcher's
// update within its phase.
func TestLauncherMoved(t *testing.T) {
	pod := func(role string, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j-" + role + "-0-0", Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: "j", jobsetv1alpha2.ReplicatedJobNameKey: role}}, Status: corev1.PodStatus{Phase: phase}}
		if role == "" {
			p.Labels = nil
		}
		return p
	}
	ready := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	update := func(o, n *corev1.Pod) bool {
		return LauncherMoved().Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
	}
	const launcher, worker = api.LauncherJob, api.WorkerJob
	p := LauncherMoved()
	cases := map[string]struct {
		got  bool
		want bool
	}{
		"a Launcher starts":                  {update(pod(launcher, corev1.PodPending), pod(launcher, corev1.PodRunning)), true},
		"a Launcher ends":                    {update(pod(launcher, corev1.PodRunning), pod(launcher, corev1.PodFailed)), true},
		"a Launcher's update within Running": {update(pod(launcher, corev1.PodRunning), ready(pod(launcher, corev1.PodRunning))), false},
		"a pending Launcher is scheduled":    {update(pod(launcher, corev1.PodPending), ready(pod(launcher, corev1.PodPending))), false},
		"a Worker starts":                    {update(pod(worker, corev1.PodPending), pod(worker, corev1.PodRunning)), false},
		"a pod of no JobSet starts":          {update(pod("", corev1.PodPending), pod("", corev1.PodRunning)), false},
		"a Launcher is made":                 {p.Create(event.CreateEvent{Object: pod(launcher, corev1.PodPending)}), true},
		"a Launcher of the initial list":     {p.Create(event.CreateEvent{Object: pod(launcher, corev1.PodRunning), IsInInitialList: true}), false},
		"a Worker is made":                   {p.Create(event.CreateEvent{Object: pod(worker, corev1.PodPending)}), false},
		"a Launcher goes":                    {p.Delete(event.DeleteEvent{Object: pod(launcher, corev1.PodRunning)}), true},
		"a Worker goes":                      {p.Delete(event.DeleteEvent{Object: pod(worker, corev1.PodRunning)}), false},
		"a generic event":                    {p.Generic(event.GenericEvent{Object: pod(launcher, corev1.PodRunning)}), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
