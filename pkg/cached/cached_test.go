package cached

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// one is a cache with one informer for every kind.
type one struct {
	crcache.Informers
	inf crcache.Informer
}

func (o one) GetInformer(context.Context, client.Object, ...crcache.InformerGetOption) (crcache.Informer, error) {
	return o.inf, nil
}

// notShared is an informer without a store to read.
type notShared struct{ crcache.Informer }

// podStore is an informer whose store holds pod a and a ConfigMap.
func podStore(t *testing.T) (toolscache.SharedIndexInformer, *corev1.Pod) {
	t.Helper()
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "a"}}
	for _, o := range []any{a, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "not-a-pod"}}} {
		if err := inf.GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return inf, a
}

// Each hands fn the store's own objects of its type (no copies), and says
// when the informer has no store it can read.
func TestEach(t *testing.T) {
	inf, a := podStore(t)
	var got []*corev1.Pod
	ok, err := Each(context.Background(), one{inf: inf}, &corev1.Pod{}, func(p *corev1.Pod) { got = append(got, p) })
	if err != nil || !ok {
		t.Fatalf("Each: ok %v, %v", ok, err)
	}
	if len(got) != 1 || got[0] != a {
		t.Errorf("Each gave %v, want the store's own pod a alone", got)
	}

	called := false
	ok, err = Each(context.Background(), one{inf: notShared{}}, &corev1.Pod{}, func(*corev1.Pod) { called = true })
	if d := cmp.Diff([]any{false, nil, false}, []any{ok, err, called}); d != "" {
		t.Errorf("an informer without a store (-want +got):\n%s", d)
	}
}

// All gives the store's own objects of its type, sized to them, and says
// when the informer has no store it can read.
func TestAll(t *testing.T) {
	inf, a := podStore(t)
	got, ok, err := All[*corev1.Pod](context.Background(), one{inf: inf}, &corev1.Pod{})
	if err != nil || !ok {
		t.Fatalf("All: ok %v, %v", ok, err)
	}
	if len(got) != 1 || got[0] != a {
		t.Errorf("All gave %v, want the store's own pod a alone", got)
	}

	got, ok, err = All[*corev1.Pod](context.Background(), one{inf: notShared{}}, &corev1.Pod{})
	if d := cmp.Diff([]any{0, false, nil}, []any{len(got), ok, err}); d != "" {
		t.Errorf("an informer without a store (-want +got):\n%s", d)
	}
}
