package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/mpijob/mpijob/pkg/dataconn"
)

// A PVC store with the cluster's objects faked (the pod's phase is what
// started sets) and exec answered by files: what a reader pod would see
// under the claim.
type fakeClaim struct {
	files   map[string]string // path under the job's folder → content
	execs   [][]string
	started corev1.PodPhase
	created *corev1.Pod
}

func newStore(t *testing.T, fc *fakeClaim, createErr error) (*PVCStore, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if createErr != nil {
				return createErr
			}
			p := obj.(*corev1.Pod)
			if p.Name == "" {
				p.Name = p.GenerateName + "x1"
			}
			p.Status.Phase = fc.started
			if fc.started == corev1.PodPending {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
			}
			fc.created = p.DeepCopy()
			return c.Create(ctx, p, opts...)
		},
	}).Build()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "cnn", Namespace: "team-a", UID: "u-1"}}
	template := &corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "mpi:1"}}}
	st, err := NewPVC(c, &rest.Config{Host: "https://127.0.0.1:1"}, tj, dataconn.PVC{Claim: "data"}, template)
	if err != nil {
		t.Fatal(err)
	}
	st.run = func(_ context.Context, pod string, out io.Writer, command ...string) error {
		fc.execs = append(fc.execs, command)
		switch {
		case command[0] == "/bin/sh" && command[2] == ListScript:
			if command[4] != st.Dir {
				return fmt.Errorf("listed %s, not the job's folder %s", command[4], st.Dir)
			}
			for name, body := range fc.files {
				fmt.Fprintf(out, "%d 1700000000.5 %s\x00", len(body), name)
			}
			return nil
		case command[0] == "/bin/cat":
			name := strings.TrimPrefix(command[2], st.Dir+"/")
			body, ok := fc.files[name]
			if !ok {
				return errors.New("no such file")
			}
			_, err := io.WriteString(out, body)
			return err
		}
		return fmt.Errorf("unexpected command %q", command)
	}
	return st, c
}

func TestPVCStoreListsOpensAndCloses(t *testing.T) {
	fc := &fakeClaim{files: map[string]string{"model.pt": "weights", "ckpt/epoch-1.pt": "e1"}, started: corev1.PodRunning}
	st, c := newStore(t, fc, nil)
	var said strings.Builder
	st.Progress = &said
	if diff := cmp.Diff(Location{Claim: "data", URI: "pvc://data/cnn/"}, st.Location()); diff != "" {
		t.Errorf("Location (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	objs, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Object{
		{Name: "ckpt/epoch-1.pt", Size: 2, LastModified: time.Unix(1700000000, 5e8).UTC()},
		{Name: "model.pt", Size: 7, LastModified: time.Unix(1700000000, 5e8).UTC()},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if !strings.Contains(said.String(), "PVC data read-only") {
		t.Errorf("progress %q: starting the pod takes time and is said", said.String())
	}
	// The reader is the job's: owned by it, labelled with its name, the
	// claim read-only.
	p := fc.created
	if p == nil || p.Labels[ReaderLabel] != "cnn" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u-1" ||
		!p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly || p.Spec.Containers[0].Image != "mpi:1" {
		t.Fatalf("reader pod %+v", p)
	}

	rc, size, err := st.Open(ctx, "model.pt")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	if err != nil || string(body) != "weights" || size != 7 {
		t.Errorf("Open = %q (%d bytes), %v", body, size, err)
	}
	if _, _, err := st.Open(ctx, "../secret"); err == nil || !strings.Contains(err.Error(), "is not in pvc://data/cnn/") {
		t.Errorf("Open of a name the list has not: %v", err)
	}
	// One pod for the whole session: the list was read once.
	if len(fc.execs) != 2 {
		t.Errorf("execs %q: one list, one cat", fc.execs)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the reader pod is still there after Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestPVCStoreOpenListsFirst(t *testing.T) {
	fc := &fakeClaim{files: map[string]string{"model.pt": "weights"}, started: corev1.PodRunning}
	st, _ := newStore(t, fc, nil)
	rc, _, err := st.Open(context.Background(), "model.pt")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rc); string(b) != "weights" {
		t.Errorf("read %q", b)
	}
}

func TestPVCStoreErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no"))
	cases := map[string]struct {
		started   corev1.PodPhase
		createErr error
		want      string
	}{
		"may not create pods": {started: corev1.PodRunning, createErr: forbidden, want: "which you may not create in team-a: ask for a role that creates pods and pods/exec there"},
		"cannot create":       {started: corev1.PodRunning, createErr: errors.New("quota"), want: "failed to start a pod that reads PVC data: quota"},
		"the reader ended":    {started: corev1.PodFailed, want: "reader pod cnn-artifacts-x1 ended"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, _ := newStore(t, &fakeClaim{started: tc.started}, tc.createErr)
			_, err := st.List(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("List error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestPVCStoreNeedsExec(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "cnn"}}
	if _, err := NewPVC(nil, nil, tj, dataconn.PVC{Claim: "data"}, &corev1.PodSpec{}); err == nil || !strings.Contains(err.Error(), "cannot exec") {
		t.Errorf("NewPVC without a REST config: %v", err)
	}
}

func TestPendingReason(t *testing.T) {
	cases := map[string]struct {
		pod  corev1.Pod
		want string
	}{
		"an image that does not pull": {pod: corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}}, want: "ErrImagePull: not found"},
		"creating is not a reason": {pod: corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}, want: "Pending"},
		"unschedulable": {pod: corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes"}}}}, want: "Unschedulable: 0/3 nodes"},
		"nothing said": {want: "Pending"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pendingReason(&tc.pod); got != tc.want {
				t.Errorf("pendingReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReaderTemplate(t *testing.T) {
	launcher := corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "launcher:1"}}}
	worker := corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "worker:1"}}}
	spec := func(names ...string) *trainer.TrainingRuntimeSpec {
		s := &trainer.TrainingRuntimeSpec{}
		for _, n := range names {
			r := jobsetReplicatedJob(n, worker)
			if n == "launcher" {
				r = jobsetReplicatedJob(n, launcher)
			}
			s.Template.Spec.ReplicatedJobs = append(s.Template.Spec.ReplicatedJobs, r)
		}
		return s
	}
	if got := readerTemplate(spec("node", "launcher")).Containers[0].Image; got != "launcher:1" {
		t.Errorf("with a Launcher: %s, want the Launcher's image", got)
	}
	if got := readerTemplate(spec("node")).Containers[0].Image; got != "worker:1" {
		t.Errorf("Workers alone: %s, want theirs", got)
	}
	if got := readerTemplate(spec()); len(got.Containers) != 0 {
		t.Errorf("no pods: %+v", got)
	}
}

func jobsetReplicatedJob(name string, spec corev1.PodSpec) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{Name: name, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}}
}
