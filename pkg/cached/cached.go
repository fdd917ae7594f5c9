// Package cached reads the objects a controller-runtime cache holds in
// place, without the copy a List makes of each: the manager's metrics
// scrape and the dashboard's job list read thousands of objects at a time.
package cached

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Each calls fn with each object of obj's kind in c's informer store that
// is a T. The objects are the cache's own: fn must not change them. ok is
// false, and fn is not called, when the informer is not a
// SharedIndexInformer (whose store Each reads).
func Each[T client.Object](ctx context.Context, c crcache.Informers, obj client.Object, fn func(T)) (ok bool, err error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return false, err
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return false, nil
	}
	for _, o := range sii.GetStore().List() {
		if t, ok := o.(T); ok {
			fn(t)
		}
	}
	return true, nil
}
