package ring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// watchNamespaces runs an informer of the cluster's namespaces, names
// only, until ctx ends, and returns once it has listed them (within
// leaseDuration): the ring divides the namespaces that exist. It returns a
// function that lists their names, sorted.
func watchNamespaces(ctx context.Context, client metadata.Interface, leaseDuration time.Duration) (func() []string, error) {
	if client == nil {
		return nil, errors.New("a ring needs Options.Metadata to list the namespaces it divides")
	}
	inf := metadatainformer.NewFilteredMetadataInformer(client,
		schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("namespace informer: %w", err)
	}
	// A list the API server refuses (RBAC without namespaces list and
	// watch) is retried by the reflector for ever: give up after a Lease
	// duration and say why, rather than hang before joining.
	var lastErr atomic.Pointer[error]
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		lastErr.Store(&err)
		klog.FromContext(ctx).Info("Listing the namespaces the ring divides; retrying", "err", err)
	})
	go inf.RunWithContext(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, leaseDuration)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), inf.HasSynced) {
		err := cmp.Or(ctx.Err(), errors.New("not listed within the Lease duration"))
		if last := lastErr.Load(); last != nil {
			err = *last
		}
		return nil, fmt.Errorf("listing the namespaces the ring divides (stencil rbac grants list and watch on namespaces): %w", err)
	}
	return func() []string {
		names := inf.GetStore().ListKeys()
		slices.Sort(names)
		return names
	}, nil
}
