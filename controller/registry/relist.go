package registry

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// A change of a CRD's schema (its generation) makes the API server build
// the custom resources' storage anew and end their watches; a watch
// resumed at the resourceVersion it ended on may then miss the writes
// made across the switch (seen on this project's plane: a WebApp
// patched just after its CRD gained a field never reached the informer,
// and its children were rendered without the field until a restart).
// So when the CRD of a served entry changes generation, the entry's
// informers are replaced by fresh ones, which list anew: they are
// started beside the old ones, swapped in once synced, and only then told
// to the workers (the handler, added after the swap, is told of every
// object), so that no sync reads the old cache after the new one's
// events. It costs one list per CRD change.

// crdGeneration is the generation of res's CRD in the cache, 0 if none.
func (r *Registry) crdGeneration(g schema.GroupVersionResource) int64 {
	if r.crds == nil {
		return 0
	}
	obj, exists, err := r.crds.GetIndexer().GetByKey(g.Resource + "." + g.Group)
	if err != nil || !exists {
		return 0
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return 0
	}
	return u.GetGeneration()
}

// relistOnSchemaChangeLocked records next's CRD generation and, when the
// CRD of a running entry changed generation since entry was looked at,
// starts the relist (relist). r.mu is held.
func (r *Registry) relistOnSchemaChangeLocked(ctx context.Context, g schema.GroupVersionResource, entry, next *Parent) {
	if next.Builtin {
		return
	}
	gen := r.crdGeneration(g)
	next.crdGeneration = gen
	if gen == 0 || entry.crdGeneration == 0 || gen == entry.crdGeneration || !entry.Served || !next.Served || entry.stop == nil || r.runCtx == nil {
		return
	}
	klog.FromContext(ctx).Info("CRD changed: listing its resources anew", "gvr", g.String(), "generation", gen)
	r.relist(ctx, g, entry.Informers)
}

// relistDelay is how long after a CRD's change the fresh informers list:
// the API server switches to the new storage when its own CRD informer
// sees the change (apiextensions-apiserver's crdHandler), which may come
// after this process's; a list sent before would be served by the old
// storage, whose watches end about a second later (tearDown) with the
// same loss. Two seconds is past both.
const relistDelay = 2 * time.Second

// relist builds fresh informers for the entry of g after relistDelay,
// runs them, and swaps them in for old once they have synced (bounded by
// CacheSyncTimeout); the entry's event handler is added after the swap.
// If the entry's informers are no longer old by then (a reload, a CRD
// gone, another relist), the fresh ones stop unused.
func (r *Registry) relist(ctx context.Context, g schema.GroupVersionResource, old map[string]cache.SharedIndexInformer) {
	cur := r.resources[g]
	if cur == nil {
		return
	}
	res, parent := cur.Res, r.runCtx
	timeout := r.opts.CacheSyncTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	logger := klog.FromContext(ctx).WithValues("gvr", g.String())
	go func() {
		select {
		case <-parent.Done():
			return
		case <-time.After(relistDelay):
		}
		fresh := &Parent{Res: res}
		if err := r.newParentInformers(ctx, fresh, nil); err != nil {
			logger.Error(err, "Relisting after a CRD change")
			return
		}
		runCtx, stop := context.WithCancel(parent)
		synced := make([]cache.InformerSynced, 0, len(fresh.Informers))
		for _, inf := range fresh.Informers {
			r.run(runCtx, inf)
			synced = append(synced, inf.HasSynced)
		}
		waitCtx, cancel := context.WithTimeout(runCtx, timeout)
		defer cancel()
		if !cache.WaitForCacheSync(waitCtx.Done(), synced...) {
			stop()
			logger.Info("Relist after a CRD change did not sync; the running informers stay", "timeout", timeout)
			return
		}
		r.mu.Lock()
		cur := r.resources[g]
		if cur == nil || cur.stop == nil || !sameInformers(cur.Informers, old) {
			r.mu.Unlock()
			stop()
			return
		}
		swapped := *cur
		oldStop := cur.stop
		swapped.Informers, swapped.stop = fresh.Informers, stop
		r.resources[g] = &swapped
		r.mu.Unlock()
		oldStop()
		if err := r.addParentHandlers(&swapped); err != nil {
			logger.Error(err, "Relisting after a CRD change")
			return
		}
		logger.V(2).Info("Relisted after a CRD change")
	}()
}
