package registry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"stencil.dev/stencil/contract"
)

// Child kinds in two steps: a plan, built without the lock (discovery is a
// request to the API server, and workers must not wait on it in
// c.parent), then published under the lock, which only swaps maps. Child
// informers are never stopped: they are label-filtered to stencil's own
// children, and a kind a reload drops costs only what stencil wrote of it.

// childPlan is what a set of parents needs of child kinds beyond the
// informers the registry has: built, not yet published or started.
type childPlan struct {
	// kinds holds every served child kind the parents render: new entries,
	// and copies of existing ones with informers added for new namespaces.
	kinds map[schema.GroupVersionKind]*Child
	// added lists the informers created for the plan, to start.
	added []namedInformer
	// waiting holds the kinds not served (yet), with the lookup's error.
	waiting map[schema.GroupVersionKind]error
	// refused holds kinds found cluster-scoped: children live in their
	// custom resource's namespace.
	refused map[schema.GroupVersionKind]bool
}

// namedInformer is an informer and what it caches, for messages.
type namedInformer struct {
	name string
	inf  cache.SharedIndexInformer
}

// planChildren builds the child informers parents need that have does not
// hold; kinds in refused are not looked up again. gate, when not nil,
// holds the new informers' watch errors until the plan is committed.
func (r *Registry) planChildren(ctx context.Context, parents map[schema.GroupVersionResource]*Parent,
	have map[schema.GroupVersionKind]*Child, refused map[schema.GroupVersionKind]bool, gate *pending) (*childPlan, error) {
	namespaces := map[string]bool{}
	var kinds []schema.GroupVersionKind
	for _, entry := range parents {
		for _, ns := range ScopeNamespaces(r.opts.Namespace, entry.Res.Namespaces) {
			namespaces[ns] = true
		}
		for _, k := range entry.Set.Kinds() {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	// In order, so that a plan's informers and messages are the same on
	// every replica.
	nsList := sort.StringSlice(make([]string, 0, len(namespaces)))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	nsList.Sort()

	plan := &childPlan{
		kinds:   map[schema.GroupVersionKind]*Child{},
		waiting: map[schema.GroupVersionKind]error{},
		refused: map[schema.GroupVersionKind]bool{},
	}
	reset := false
	for _, k := range kinds {
		if refused[k] {
			continue
		}
		childKind, ok := have[k]
		if !ok {
			mapping, err := r.restMapping(k, &reset)
			if err != nil {
				// Not served (yet): a custom resource of another operator
				// whose CRD is not installed is waited for, like a
				// configured resource; CRD events look again.
				plan.waiting[k] = err
				continue
			}
			if mapping.Scope.Name() == meta.RESTScopeNameRoot {
				plan.refused[k] = true
				continue
			}
			childKind = &Child{GVK: k, GVR: mapping.Resource, Informers: map[string]cache.SharedIndexInformer{}}
		} else {
			cp := *childKind
			cp.Informers = maps.Clone(childKind.Informers)
			cp.Names = maps.Clone(childKind.Names)
			childKind = &cp
		}
		for _, ns := range nsList {
			if _, ok := childKind.Informers[metav1.NamespaceAll]; ok {
				break
			}
			if _, ok := childKind.Informers[ns]; ok {
				continue
			}
			added, err := r.addChildInformers(ctx, childKind, ns, gate)
			if err != nil {
				return nil, err
			}
			plan.added = append(plan.added, added...)
		}
		plan.kinds[k] = childKind
	}
	return plan, nil
}

// addChildInformers gives childKind informers for namespace ns (not started):
// its children, and the names of every object of its kind when the
// registry has a metadata client.
func (r *Registry) addChildInformers(ctx context.Context, childKind *Child, ns string, gate *pending) ([]namedInformer, error) {
	name := childKind.GVR.GroupResource().String()
	managed := contract.LabelManagedBy + "=" + contract.ManagedByValue
	// Children are cached only if they carry stencil's label: on a shared
	// cluster the Deployments and Services of others cost no memory.
	inf := r.newInformer(childKind.GVR, ns, managed, cache.Indexers{OwnerUIDIndex: indexByOwnerUID})
	if t := r.opts.Hooks.ChildTransform; t != nil {
		if err := inf.SetTransform(t); err != nil {
			return nil, fmt.Errorf("informer for %s: %w", childKind.GVR, err)
		}
	}
	if h := r.opts.Hooks.ChildHandler; h != nil {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, fmt.Errorf("adding event handler for %s: %w", childKind.GVR, err)
		}
	}
	r.watchErrors(ctx, inf, func() bool { return true }, gate, name)
	childKind.Informers[ns] = inf
	added := []namedInformer{{name: name, inf: inf}}
	if r.opts.Metadata == nil {
		return added, nil
	}
	if childKind.Names == nil {
		childKind.Names = map[string]cache.SharedIndexInformer{}
	}
	names := r.newNamesInformer(childKind.GVR, ns)
	if err := names.SetTransform(stripNames); err != nil {
		return nil, fmt.Errorf("names informer for %s: %w", childKind.GVR, err)
	}
	r.watchErrors(ctx, names, func() bool { return true }, gate, name+" (names)")
	childKind.Names[ns] = names
	return append(added, namedInformer{name: name + " (names)", inf: names}), nil
}

// restMapping looks k up. A kind the mapper does not know may be one whose
// CRD was installed since discovery was cached: the mapper is reset once
// per plan (*reset) and asked again.
func (r *Registry) restMapping(k schema.GroupVersionKind, reset *bool) (*meta.RESTMapping, error) {
	mapping, err := r.opts.Mapper.RESTMapping(k.GroupKind(), k.Version)
	if err == nil || *reset {
		return mapping, err
	}
	rm, ok := r.opts.Mapper.(meta.ResettableRESTMapper)
	if !ok {
		return mapping, err
	}
	rm.Reset()
	*reset = true
	return r.opts.Mapper.RESTMapping(k.GroupKind(), k.Version)
}

// commitChildrenLocked publishes plan; r.mu is held. With start, it runs
// the plan's informers under the workers' context (if they run) and
// returns them, to wait for. Each change of state is logged once.
func (r *Registry) commitChildrenLocked(ctx context.Context, plan *childPlan, start bool) []cache.InformerSynced {
	logger := klog.FromContext(ctx)
	for k, childKind := range plan.kinds {
		if r.waitingKinds[k] {
			logger.Info("Serving child kind", "kind", k.String(), "resource", childKind.GVR.String())
		}
		r.children[k] = childKind
	}
	waiting := make(map[schema.GroupVersionKind]bool, len(plan.waiting))
	for k, err := range plan.waiting {
		if !r.waitingKinds[k] {
			logger.Info("Waiting for child kind to be served", "kind", k.String(), "err", err)
		}
		waiting[k] = true
	}
	r.waitingKinds = waiting
	for k := range plan.refused {
		if !r.refusedKinds[k] {
			logger.Error(nil, "Child kind is cluster-scoped and is never written: children live in their custom resource's namespace", "kind", k.String())
		}
		r.refusedKinds[k] = true
	}
	r.childGen++
	if !start || r.childCtx == nil {
		return nil
	}
	started := make([]cache.InformerSynced, 0, len(plan.added))
	for _, a := range plan.added {
		r.run(r.childCtx, a.inf)
		started = append(started, a.inf.HasSynced)
	}
	return started
}

// resolveWaiting looks the waiting child kinds up again, after a CRD
// change that may have brought them. Discovery runs outside r.mu; the lock
// is held only to publish, and only if nothing changed the child kinds
// meanwhile (else it plans again from the new state).
func (r *Registry) resolveWaiting(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if rm, ok := r.opts.Mapper.(meta.ResettableRESTMapper); ok {
		rm.Reset()
	}
	// Two attempts suffice: the child kinds change only on a reload (which
	// looks again itself once it ends) and on this path.
	for range 2 {
		r.mu.RLock()
		parents, have, refused := maps.Clone(r.resources), maps.Clone(r.children), maps.Clone(r.refusedKinds)
		gen, before := r.childGen, len(r.waitingKinds)
		r.mu.RUnlock()
		plan, err := r.planChildren(ctx, parents, have, refused, nil)
		if err != nil {
			logger.Error(err, "Starting child informers")
			return
		}
		r.mu.Lock()
		if r.reconfiguring {
			r.recheck = true
			r.mu.Unlock()
			return
		}
		if r.childGen != gen {
			r.mu.Unlock()
			continue
		}
		started := r.commitChildrenLocked(ctx, plan, true)
		resolved := len(r.waitingKinds) < before
		r.mu.Unlock()
		if resolved {
			// Resources that failed for want of the kind render again once
			// its informers have synced.
			go func() {
				if cache.WaitForCacheSync(ctx.Done(), started...) && r.opts.Hooks.ChildKindsResolved != nil {
					r.opts.Hooks.ChildKindsResolved()
				}
			}()
		}
		return
	}
}
