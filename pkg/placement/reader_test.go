package placement

import (
	"context"
	"errors"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mpijob/mpijob/pkg/api"
	"github.com/mpijob/mpijob/pkg/runtimes"
)

// A placement check waits a bounded time for the nodes and pods: on the
// replica that does not lead, the first dry run starts the cache of every
// pod, and a read past the webhook's timeout would fail the dry run
// instead of saying to try again.
func TestJudgeWaitsABoundedTime(t *testing.T) {
	nodes := cluster()
	objs := []client.Object{&nodes[0], &nodes[1], &nodes[2]}
	shape := runtimes.Shape{Workers: 1, WorkerPod: *spec(map[string]string{"cpu": "1"}), LauncherPod: *spec(map[string]string{"cpu": "1"})}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a"}}
	for name, tc := range map[string]struct {
		// syncing: the pods' list waits until its context ends, as the
		// cache's first read of a kind waits for its informer.
		syncing bool
		// callerGone: the caller's own context has ended.
		callerGone bool
		wantErr    error
	}{
		"a synced cache answers":                {},
		"a cache still syncing says try again":  {syncing: true, wantErr: ErrStillReading},
		"a caller who left gets its own reason": {syncing: true, callerGone: true},
	} {
		t.Run(name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*corev1.PodList); ok && tc.syncing {
						<-ctx.Done()
						return errors.New("failed waiting for *v1.Pod Informer to sync")
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.callerGone {
				cancel()
			}
			r := &Reader{Client: cl, Wait: 50 * time.Millisecond}
			ans, err := r.Judge(ctx, tj, shape, false)
			switch {
			case tc.wantErr == nil && !tc.callerGone && err != nil:
				t.Fatalf("Judge: %v", err)
			case tc.wantErr == nil && !tc.callerGone && !ans.Fits:
				t.Errorf("Judge: %+v, want a job that fits", ans)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Judge: %v, want %v", err, tc.wantErr)
			case tc.callerGone && (err == nil || errors.Is(err, ErrStillReading)):
				t.Errorf("Judge: %v, want the read's own error for a caller who left", err)
			}
		})
	}
}
