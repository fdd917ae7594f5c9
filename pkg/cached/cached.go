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
	objs, ok, err := stored(ctx, c, obj)
	for _, o := range objs {
		if t, ok := o.(T); ok {
			fn(t)
		}
	}
	return ok, err
}

// All is the objects of obj's kind in c's informer store that are a T, the
// cache's own (the caller must not change them), in no order: Each, for a
// caller that wants their number first (to size what it makes of them).
func All[T client.Object](ctx context.Context, c crcache.Informers, obj client.Object) (out []T, ok bool, err error) {
	objs, ok, err := stored(ctx, c, obj)
	out = make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, ok, err
}

// stored is the store of obj's informer in c, listed; ok is false when the
// informer is not a SharedIndexInformer.
func stored(ctx context.Context, c crcache.Informers, obj client.Object) ([]any, bool, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, false, err
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, false, nil
	}
	return sii.GetStore().List(), true, nil
}
