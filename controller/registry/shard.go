package registry

import (
	"context"
	"errors"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// A ring member (stencil run --ring) watches only its share of the
// namespaces. Every informer the registry builds then asks the API server
// for that share (ListOptions.ShardSelector, where the server serves
// sharded list and watch) and also drops, before the informer's store,
// whatever falls outside it: a server without the feature ignores the
// selector and sends everything, and memory must still be the share's.
// An informer keeps the share it was built with; Reshard builds a new set.

// Shard is a share of the namespaces.
type Shard struct {
	// Selector is the shardSelector to send; empty sends none (the
	// server does not serve sharded list and watch).
	Selector string
	// Holds reports whether a namespace is in the share.
	Holds func(ns string) bool
}

// shard returns the share informers are built for now; nil is everything.
func (r *Registry) shard() *Shard { return r.share.Load() }

// newInformer builds an informer of g's objects in ns (all namespaces when
// empty) that carry labelSelector, limited to the registry's share.
func (r *Registry) newInformer(g schema.GroupVersionResource, ns, labelSelector string, indexers cache.Indexers) cache.SharedIndexInformer {
	s := r.shard()
	if s == nil {
		return dynamicinformer.NewFilteredDynamicInformer(r.opts.Dynamic, g, ns, 0, indexers,
			func(lo *metav1.ListOptions) { lo.LabelSelector = labelSelector }).Informer()
	}
	var client dynamic.ResourceInterface = r.opts.Dynamic.Resource(g)
	if ns != metav1.NamespaceAll {
		client = r.opts.Dynamic.Resource(g).Namespace(ns)
	}
	tweak := func(lo *metav1.ListOptions) {
		lo.LabelSelector, lo.ShardSelector = labelSelector, s.Selector
	}
	// The client says whether it serves streaming lists (a real API server
	// does; the tests' fake does not), as dynamicinformer's informers say.
	lw := shareListWatch(s, tweak,
		func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) { return client.List(ctx, lo) },
		client.Watch)
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, r.opts.Dynamic), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: g.String()})
}

// newNamesInformer builds the metadata informer of every object of g in ns
// (see Child.Names), limited to the registry's share.
func (r *Registry) newNamesInformer(g schema.GroupVersionResource, ns string) cache.SharedIndexInformer {
	s := r.shard()
	if s == nil {
		return metadatainformer.NewFilteredMetadataInformer(r.opts.Metadata, g, ns, 0, cache.Indexers{}, nil).Informer()
	}
	var client metadata.ResourceInterface = r.opts.Metadata.Resource(g)
	if ns != metav1.NamespaceAll {
		client = r.opts.Metadata.Resource(g).Namespace(ns)
	}
	lw := shareListWatch(s, func(lo *metav1.ListOptions) { lo.ShardSelector = s.Selector },
		func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) { return client.List(ctx, lo) },
		client.Watch)
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, r.opts.Metadata), &metav1.PartialObjectMetadata{}, cache.SharedIndexInformerOptions{ObjectDescription: g.String() + " (names)"})
}

// shareListWatch is the ListWatch of an informer limited to s: tweak asks
// the server for the share, and whatever it sends outside it (a server
// that ignores the selector) is dropped before the informer's store.
func shareListWatch(s *Shard, tweak func(*metav1.ListOptions),
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			tweak(&lo)
			l, err := list(ctx, lo)
			if err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				return nil, err
			}
			kept := items[:0]
			for _, o := range items {
				if m, err := meta.Accessor(o); err == nil && s.Holds(m.GetNamespace()) {
					kept = append(kept, o)
				}
			}
			return l, meta.SetList(l, kept)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			tweak(&lo)
			w, err := watchFn(ctx, lo)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, inShare(s)), nil
		},
	}
}

// inShare keeps the watch events of objects in s, and every event that is
// not an object's (bookmarks, errors).
func inShare(s *Shard) watch.FilterFunc {
	return func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Bookmark || e.Type == watch.Error {
			return e, true
		}
		m, ok := e.Object.(metav1.Object)
		return e, !ok || s.Holds(m.GetNamespace())
	}
}

// Reshard makes every informer watch share s instead: it builds a new set
// of parent and child informers for s, runs them and waits for their
// caches without the lock, then swaps them in under it and stops the old
// ones, as a reload does. The new informers report their objects as added
// while they list, before the swap, when the registry still serves the old
// caches: the caller looks at every resource again once Reshard returns (a
// converged one costs no write). Before Start it builds the informers
// without running them. It fails, changing nothing, when the new caches do
// not sync.
func (r *Registry) Reshard(ctx context.Context, s *Shard) error {
	if s != nil && s.Holds == nil {
		return errors.New("registry: a shard needs Holds")
	}
	r.reconfigureMu.Lock()
	defer r.reconfigureMu.Unlock()
	r.mu.Lock()
	r.share.Store(s)
	running, have, runCtx, gen := maps.Clone(r.resources), maps.Clone(r.children), r.runCtx, r.childGen
	r.mu.Unlock()

	p, err := r.prepareShard(ctx, running, have, runCtx)
	if err != nil {
		return err
	}
	if err := r.waitPrepared(ctx, "reshard", p.wait, p.gate); err != nil {
		p.discard()
		return err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runCtx != runCtx {
		// Started meanwhile (Start runs the informers it finds, the ones
		// this would stop): the new informers, built before, never ran.
		p.discard()
		return errors.New("registry: started during the reshard")
	}
	if r.childGen != gen {
		// Child informers were added meanwhile (a kind became served),
		// under the context this would stop: build again from the new state.
		p.discard()
		return errors.New("registry: the child kinds changed during the reshard")
	}
	p.gate.committed.Store(true)
	r.commitShardLocked(ctx, p, running)
	klog.FromContext(ctx).V(2).Info("Resharded the informers", "resources", len(p.parents), "childKinds", len(p.children))
	return nil
}

// preparedShard is a reshard's new informers, running (once the registry
// runs) but not yet serving.
type preparedShard struct {
	parents  map[schema.GroupVersionResource]*Parent
	children map[schema.GroupVersionKind]*Child
	wait     []namedInformer
	gate     *pending
	// childCtx, when the registry runs, is the new child informers'.
	childCtx     context.Context
	stopChildren context.CancelFunc
}

// discard stops the prepared informers.
func (p *preparedShard) discard() {
	p.stopChildren()
	for _, entry := range p.parents {
		if entry.stop != nil {
			entry.stop()
		}
	}
}

// prepareShard builds, and runs under runCtx when set, a copy of every
// parent and child informer for the registry's current share.
func (r *Registry) prepareShard(ctx context.Context, running map[schema.GroupVersionResource]*Parent, have map[schema.GroupVersionKind]*Child, runCtx context.Context) (*preparedShard, error) {
	p := &preparedShard{parents: map[schema.GroupVersionResource]*Parent{}, children: map[schema.GroupVersionKind]*Child{},
		gate: &pending{}, stopChildren: func() {}}
	if runCtx != nil {
		p.childCtx, p.stopChildren = context.WithCancel(runCtx)
	}
	for g, entry := range running {
		cp := *entry
		if err := r.makeParentInformers(ctx, &cp, p.gate); err != nil {
			p.discard()
			return nil, err
		}
		cp.stop = nil
		if runCtx != nil && entry.Running() {
			parentCtx, stop := context.WithCancel(runCtx)
			cp.stop = stop
			for _, inf := range cp.Informers {
				r.run(parentCtx, inf)
				p.wait = append(p.wait, namedInformer{name: g.GroupResource().String(), inf: inf})
			}
		}
		p.parents[g] = &cp
	}
	for k, childKind := range have {
		cp := &Child{GVK: childKind.GVK, GVR: childKind.GVR, Informers: map[string]cache.SharedIndexInformer{}}
		for ns := range childKind.Informers {
			added, err := r.addChildInformers(ctx, cp, ns, p.gate)
			if err != nil {
				p.discard()
				return nil, err
			}
			for _, a := range added {
				if p.childCtx != nil {
					r.run(p.childCtx, a.inf)
					p.wait = append(p.wait, a)
				}
			}
		}
		p.children[k] = cp
	}
	return p, nil
}

// commitShardLocked swaps the prepared informers in and stops the old
// ones; running is the registry's entries as p was built from them.
// Called under r.mu.
func (r *Registry) commitShardLocked(ctx context.Context, p *preparedShard, running map[schema.GroupVersionResource]*Parent) {
	for g, entry := range p.parents {
		cur, ok := r.resources[g]
		if !ok || !sameInformers(cur.Informers, running[g].Informers) {
			// A reload or a CRD that went and came back gave the entry
			// informers of its own meanwhile, built for s already: keep them.
			if entry.stop != nil {
				entry.stop()
			}
			continue
		}
		// A CRD event may have copied the entry meanwhile (same informers,
		// another Served): keep what it says, swap the informers.
		swapped := *cur
		swapped.Informers, swapped.stop = entry.Informers, entry.stop
		if cur.stop != nil {
			cur.stop()
		}
		switch {
		case cur.Running() && swapped.stop == nil:
			r.startParentLocked(&swapped) // started since the snapshot
		case !cur.Running() && swapped.stop != nil:
			// Stopped since the snapshot: fresh informers for when it returns.
			swapped.stop()
			swapped.stop = nil
			if err := r.makeParentInformers(ctx, &swapped, nil); err != nil {
				klog.FromContext(ctx).Error(err, "Preparing informers", "gvr", g.String())
			}
		}
		r.resources[g] = &swapped
	}
	for k, childKind := range p.children {
		r.children[k] = childKind
	}
	if r.stopChildren != nil {
		r.stopChildren()
	}
	if p.childCtx != nil {
		r.childCtx, r.stopChildren = p.childCtx, p.stopChildren
	}
	r.childGen++
}

// sameInformers reports whether a and b hold the same informers.
func sameInformers(a, b map[string]cache.SharedIndexInformer) bool {
	if len(a) != len(b) {
		return false
	}
	for ns, inf := range a {
		if b[ns] != inf {
			return false
		}
	}
	return true
}
