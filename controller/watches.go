package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/gvr"
	"stencil.dev/stencil/templates"
)

// The watch registry: every configured resource has a lifecycle of its own.
// Its informers run while its CRD is Established and serves the configured
// version, stop when the CRD goes away or stops serving it, and start again
// when it comes back. A CRD that is not installed is waited for, never an
// error of the process: one team's missing CRD must not stop the others.
// Which CRDs exist comes from an informer on the CRD objects themselves
// (stripped to the few fields read here), not from polling discovery: a
// change is seen within a watch event, and costs nothing while nothing
// changes.

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// parentKind is one configured resource and its informers. It is replaced,
// never changed, once published in Controller.resources: a sync holds the
// version it started with.
type parentKind struct {
	res   gvr.Resource
	set   *templates.Set
	gvk   schema.GroupVersionKind // Kind empty until the resource is served
	label string                  // metrics label: resource.group
	// builtin resources are served by the API server itself, not by a CRD.
	builtin bool
	// served: the API server serves the resource at the configured version.
	served bool
	// informers by namespace ("" watches all namespaces); created with the
	// parentKind, run only while served.
	informers map[string]cache.SharedIndexInformer
	// stop ends the informers; nil while they do not run.
	stop context.CancelFunc
	// logged: the resource's state was logged once ("Waiting for CRD").
	logged bool
}

// childKind is one allowed child kind and its informers.
type childKind struct {
	gvk schema.GroupVersionKind
	gvr schema.GroupVersionResource
	// informers cache stencil's children (label-filtered), by namespace.
	informers map[string]cache.SharedIndexInformer
	// names cache the name and UID of every object of the kind, by
	// namespace (metadata only, stripped): whether a name is taken by a
	// foreign object is known without a request. Nil without
	// Options.Metadata.
	names map[string]cache.SharedIndexInformer
}

// nameTaken reports whether the names cache holds an object ns/name.
func nameTaken(names map[string]cache.SharedIndexInformer, ns, name string) bool {
	inf := informerFor(names, ns)
	if inf == nil {
		return true // unknown: the caller reads the object
	}
	_, exists, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	return exists || err != nil
}

// stripNames keeps what nameTaken needs of an object's metadata: the
// garbage collector's approach, at a few hundred bytes per object, so that
// caching every object of a child kind costs little on a shared cluster.
func stripNames(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}}, nil
}

// builtinGroup reports whether a group belongs to Kubernetes itself (served
// without a CRD): the core and unqualified groups, and *.k8s.io.
func builtinGroup(group string) bool {
	return !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// newParentKind builds the entry for res, with informers not yet running.
func (c *Controller) newParentKind(ctx context.Context, res gvr.Resource, set *templates.Set) (*parentKind, error) {
	g := res.GVR()
	pk := &parentKind{res: res, set: set, label: g.GroupResource().String(), builtin: builtinGroup(res.Group),
		gvk: schema.GroupVersionKind{Group: res.Group, Version: res.Version}}
	if pk.builtin {
		gvk, err := c.opts.Mapper.KindFor(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: the API server does not serve this built-in resource: %w", c.opts.Config.Path, g, err)
		}
		pk.gvk, pk.served = gvk, true
	}
	if err := c.makeParentInformers(ctx, pk); err != nil {
		return nil, err
	}
	return pk, nil
}

// makeParentInformers gives pk a fresh set of informers: an informer that
// was stopped cannot run again.
func (c *Controller) makeParentInformers(ctx context.Context, pk *parentKind) error {
	g := pk.res.GVR()
	pk.informers = map[string]cache.SharedIndexInformer{}
	namespaces := scopeNamespaces(c.opts.Namespace, pk.res.Namespaces)
	if len(namespaces) == 0 {
		klog.FromContext(ctx).Info("Resource not watched: none of its namespaces is in --namespace",
			"gvr", g.String(), "namespace", c.opts.Namespace)
	}
	selector := pk.res.LabelSelector().String()
	for _, ns := range namespaces {
		inf := dynamicinformer.NewFilteredDynamicInformer(c.opts.Dynamic, g, ns, 0, cache.Indexers{},
			func(lo *metav1.ListOptions) { lo.LabelSelector = selector }).Informer()
		if err := inf.SetTransform(stripParent); err != nil {
			return fmt.Errorf("informer for %s: %w", g, err)
		}
		if _, err := inf.AddEventHandler(c.parentHandler(ctx, g)); err != nil {
			return fmt.Errorf("adding event handler for %s: %w", g, err)
		}
		c.watchErrors(ctx, inf, func() bool { return c.crdServes(pk) })
		pk.informers[ns] = inf
	}
	return nil
}

// crdServes reports whether the CRD behind pk is Established and serves its
// version, from the CRD cache, and the Kind it serves.
func (c *Controller) crdServes(pk *parentKind) bool {
	if pk.builtin {
		return true
	}
	_, ok := c.servedKind(pk.res)
	return ok
}

// servedKind looks res up in the CRD cache: the CRD's name is always
// <plural>.<group>.
func (c *Controller) servedKind(res gvr.Resource) (string, bool) {
	obj, exists, err := c.crds.GetIndexer().GetByKey(res.Resource + "." + res.Group)
	if err != nil || !exists {
		return "", false
	}
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok || !isEstablished(crd) || crd.GetDeletionTimestamp() != nil {
		// A CRD being deleted takes its custom resources with it: stop
		// before its watches break.
		return "", false
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == res.Version && m["served"] == true {
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			return kind, kind != ""
		}
	}
	return "", false
}

func isEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Established" {
			return m["status"] == "True"
		}
	}
	return false
}

// stripCRD keeps the few fields of a CRD the registry reads: a CRD's schema
// can be hundreds of kilobytes, and a cluster may hold hundreds of CRDs.
func stripCRD(obj any) (any, error) {
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var versions []any
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			versions = append(versions, map[string]any{"name": m["name"], "served": m["served"]})
		}
	}
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	var established []any
	for _, cond := range conds {
		if m, _ := cond.(map[string]any); m["type"] == "Established" {
			established = append(established, map[string]any{"type": m["type"], "status": m["status"]})
		}
	}
	md := map[string]any{"name": crd.GetName(), "resourceVersion": crd.GetResourceVersion(), "uid": string(crd.GetUID())}
	if ts := crd.GetDeletionTimestamp(); ts != nil {
		md["deletionTimestamp"] = ts.UTC().Format(time.RFC3339)
	}
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind(),
		"metadata": md,
		"spec":     map[string]any{"names": map[string]any{"kind": kind}, "versions": versions},
		"status":   map[string]any{"conditions": established},
	}}
	return out, nil
}

// newCRDInformer watches the CRD objects; every change re-evaluates which
// configured resources are served.
func (c *Controller) newCRDInformer(ctx context.Context) error {
	c.crds = dynamicinformer.NewFilteredDynamicInformer(c.opts.Dynamic, crdGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := c.crds.SetTransform(stripCRD); err != nil {
		return fmt.Errorf("CRD informer: %w", err)
	}
	refresh := func(any) { c.refresh(ctx) }
	if _, err := c.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refresh,
		UpdateFunc: func(_, cur any) { refresh(cur) },
		DeleteFunc: refresh,
	}); err != nil {
		return fmt.Errorf("CRD informer: %w", err)
	}
	c.watchErrors(ctx, c.crds, func() bool { return true })
	return nil
}

// refresh brings every configured resource's informers in line with what
// the API server serves: it starts the newly served, stops the no longer
// served, and logs and records each change once.
func (c *Controller) refresh(ctx context.Context) {
	if !c.crds.HasSynced() {
		return
	}
	c.mu.Lock()
	for g, pk := range c.resources {
		c.refreshLocked(ctx, g, pk)
	}
	if len(c.waitingKinds) == 0 {
		c.mu.Unlock()
		return
	}
	// A child kind was not served: a CRD change may have brought it.
	if r, ok := c.opts.Mapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
	before := len(c.waitingKinds)
	started, err := c.ensureChildrenLocked(ctx)
	resolved := len(c.waitingKinds) < before
	c.mu.Unlock()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Starting child informers")
		return
	}
	if resolved {
		// Resources that failed for want of the kind render again once
		// its informers have synced.
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), started...) {
				c.EnqueueAll()
			}
		}()
	}
}

// refreshLocked re-evaluates one resource; c.mu is held.
func (c *Controller) refreshLocked(ctx context.Context, g schema.GroupVersionResource, pk *parentKind) {
	logger := klog.FromContext(ctx)
	served, kind := true, pk.gvk.Kind
	if !pk.builtin {
		kind, served = c.servedKind(pk.res)
	}
	next := *pk
	switch {
	case served && (!pk.served || kind != pk.gvk.Kind):
		if pk.served {
			delete(c.byKind, pk.gvk.GroupKind())
		}
		next.served, next.gvk.Kind = true, kind
		c.byKind[next.gvk.GroupKind()] = g
		logger.Info("Serving resource", "gvr", g.String(), "kind", kind)
	case !served && pk.served:
		next.served = false
		delete(c.byKind, pk.gvk.GroupKind())
		logger.Info("Stopped serving resource: its CRD is gone or no longer serves this version", "gvr", g.String())
	case !served && !pk.waitLogged():
		logger.Info("Waiting for CRD", "gvr", g.String(), "crd", g.Resource+"."+g.Group)
	}
	c.opts.Metrics.served.WithLabelValues(pk.label).Set(boolGauge(next.served))
	if c.runCtx != nil {
		switch {
		case next.served && next.stop == nil:
			c.startParentLocked(&next)
		case !next.served && next.stop != nil:
			next.stop()
			next.stop = nil
			// A stopped informer cannot run again: make fresh ones for
			// when the CRD comes back.
			if err := c.makeParentInformers(ctx, &next); err != nil {
				logger.Error(err, "Preparing informers", "gvr", g.String())
			}
		}
	}
	next.logged = true
	c.resources[g] = &next
}

// waitLogged reports whether "Waiting for CRD" was logged already.
func (pk *parentKind) waitLogged() bool { return pk.logged }

// startParentLocked runs pk's informers under the workers' context.
func (c *Controller) startParentLocked(pk *parentKind) {
	ctx, cancel := context.WithCancel(c.runCtx)
	pk.stop = cancel
	for _, inf := range pk.informers {
		go inf.RunWithContext(ctx)
	}
}

// stopAll stops every parent informer (shutdown).
func (c *Controller) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pk := range c.resources {
		if pk.stop != nil {
			pk.stop()
		}
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// parent returns the configured resource g, or nil.
func (c *Controller) parent(g schema.GroupVersionResource) *parentKind {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.resources[g]
}

// child returns the child kind k, or nil.
func (c *Controller) child(k schema.GroupVersionKind) *childKind {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.children[k]
}

// childKinds returns the child kinds.
func (c *Controller) childKinds() []*childKind {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*childKind, 0, len(c.children))
	for _, ck := range c.children {
		out = append(out, ck)
	}
	return out
}

// ensureChildren creates (and, when the workers run, starts) the informers
// for the child kinds and namespaces of the configured resources; c.mu is
// held. It returns the informers it started, to wait for. Child informers
// are never stopped: they are label-filtered to stencil's own children.
func (c *Controller) ensureChildrenLocked(ctx context.Context) ([]cache.InformerSynced, error) {
	namespaces := map[string]bool{}
	var kinds []schema.GroupVersionKind
	for _, pk := range c.resources {
		for _, ns := range scopeNamespaces(c.opts.Namespace, pk.res.Namespaces) {
			namespaces[ns] = true
		}
		for _, k := range pk.set.Kinds() {
			if !containsGVK(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	managed := templates.LabelManagedBy + "=" + templates.ManagedByValue
	var started []cache.InformerSynced
	for _, k := range kinds {
		ck, ok := c.children[k]
		if !ok {
			mapping, err := c.opts.Mapper.RESTMapping(k.GroupKind(), k.Version)
			if err != nil {
				// Not served (yet): a custom resource of another operator
				// whose CRD is not installed is waited for, like a
				// configured resource; CRD events look again.
				if !c.waitingKinds[k] {
					klog.FromContext(ctx).Info("Waiting for child kind to be served", "kind", k.String(), "err", err)
				}
				c.waitingKinds[k] = true
				continue
			}
			if mapping.Scope.Name() == meta.RESTScopeNameRoot {
				if !c.waitingKinds[k] {
					klog.FromContext(ctx).Error(nil, "Child kind is cluster-scoped and is never written: children live in their custom resource's namespace", "kind", k.String())
				}
				c.waitingKinds[k] = true
				continue
			}
			if c.waitingKinds[k] {
				klog.FromContext(ctx).Info("Serving child kind", "kind", k.String(), "resource", mapping.Resource.String())
			}
			delete(c.waitingKinds, k)
			ck = &childKind{gvk: k, gvr: mapping.Resource, informers: map[string]cache.SharedIndexInformer{}}
		} else {
			cp := *ck
			cp.informers = maps.Clone(ck.informers)
			cp.names = maps.Clone(ck.names)
			ck = &cp
		}
		for ns := range namespaces {
			if _, ok := ck.informers[metav1.NamespaceAll]; ok {
				break
			}
			if _, ok := ck.informers[ns]; ok {
				continue
			}
			// Children are cached only if they carry stencil's label: on a
			// shared cluster the Deployments and Services of others cost
			// no memory.
			inf := dynamicinformer.NewFilteredDynamicInformer(c.opts.Dynamic, ck.gvr, ns, 0,
				cache.Indexers{ownerUIDIndex: indexByOwnerUID},
				func(lo *metav1.ListOptions) { lo.LabelSelector = managed }).Informer()
			if err := inf.SetTransform(stripChild); err != nil {
				return nil, fmt.Errorf("informer for %s: %w", ck.gvr, err)
			}
			if _, err := inf.AddEventHandler(c.childHandler(ctx)); err != nil {
				return nil, fmt.Errorf("adding event handler for %s: %w", ck.gvr, err)
			}
			c.watchErrors(ctx, inf, func() bool { return true })
			ck.informers[ns] = inf
			if c.runCtx != nil {
				go inf.RunWithContext(c.runCtx)
				started = append(started, inf.HasSynced)
			}
			if c.opts.Metadata == nil {
				continue
			}
			if ck.names == nil {
				ck.names = map[string]cache.SharedIndexInformer{}
			}
			names := metadatainformer.NewFilteredMetadataInformer(c.opts.Metadata, ck.gvr, ns, 0, cache.Indexers{}, nil).Informer()
			if err := names.SetTransform(stripNames); err != nil {
				return nil, fmt.Errorf("names informer for %s: %w", ck.gvr, err)
			}
			c.watchErrors(ctx, names, func() bool { return true })
			ck.names[ns] = names
			if c.runCtx != nil {
				go names.RunWithContext(c.runCtx)
				started = append(started, names.HasSynced)
			}
		}
		c.children[k] = ck
	}
	return started, nil
}

// sameWatch reports whether two versions of an entry watch the same objects
// (so its informers can be kept across a reload).
func sameWatch(a, b gvr.Resource) bool {
	return a.GVR() == b.GVR() && a.Selector == b.Selector && strings.Join(a.Namespaces, ",") == strings.Join(b.Namespaces, ",")
}

// Reconfigure swaps in a new, already validated config and its templates,
// atomically: entries that are new start (once their CRD is served),
// entries that are gone stop (their children stay as they are), and every
// custom resource of the entries that remain is re-rendered, which applies
// what a changed template now renders and costs nothing where it renders
// the same. It works before Run too (a standby replica keeps its config
// current), and is safe to call while workers run.
func (c *Controller) Reconfigure(ctx context.Context, cfg *gvr.Config, sets []*templates.Set) error {
	if cfg == nil || len(sets) != len(cfg.Resources) {
		return fmt.Errorf("controller: %d template sets for %d configured resources", len(sets), len(cfg.Resources))
	}
	logger := klog.FromContext(ctx)
	c.mu.Lock()
	next := map[schema.GroupVersionResource]*parentKind{}
	var kept []schema.GroupVersionResource
	for i, res := range cfg.Resources {
		g := res.GVR()
		if old, ok := c.resources[g]; ok && sameWatch(old.res, res) {
			pk := *old
			pk.res, pk.set = res, sets[i]
			next[g] = &pk
			kept = append(kept, g)
			continue
		}
		pk, err := c.newParentKind(ctx, res, sets[i])
		if err != nil {
			c.mu.Unlock()
			return err
		}
		next[g] = pk
	}
	for g, old := range c.resources {
		if n, ok := next[g]; ok && n.informers != nil && sameWatch(old.res, n.res) {
			continue
		}
		if old.stop != nil {
			old.stop()
		}
		if old.served {
			delete(c.byKind, old.gvk.GroupKind())
		}
		if _, ok := next[g]; !ok {
			c.opts.Metrics.served.DeleteLabelValues(old.label)
			logger.Info("Stopped serving resource: removed from the config; its children stay as they are", "gvr", g.String())
		}
	}
	c.resources = next
	c.opts.Config, c.opts.Sets = cfg, sets
	for g, pk := range c.resources {
		c.precreateLocked(pk)
		if c.crds != nil {
			c.refreshLocked(ctx, g, pk)
		}
	}
	started, err := c.ensureChildrenLocked(ctx)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if len(started) > 0 {
		syncCtx, cancel := context.WithTimeout(ctx, c.opts.CacheSyncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(syncCtx.Done(), started...) {
			return fmt.Errorf("child informers did not sync within %s", c.opts.CacheSyncTimeout)
		}
	}
	n := 0
	for _, g := range kept {
		n += c.enqueueResource(g)
	}
	logger.Info("Config reloaded", "resources", len(cfg.Resources), "requeued", n)
	return nil
}

func (c *Controller) precreateLocked(pk *parentKind) {
	var names []string
	for _, k := range pk.set.Kinds() {
		names = append(names, k.Kind)
	}
	c.opts.Metrics.precreate(pk.label, names)
}

// enqueueResource adds every cached custom resource of g to the queue.
func (c *Controller) enqueueResource(g schema.GroupVersionResource) int {
	pk := c.parent(g)
	if pk == nil || pk.stop == nil {
		return 0
	}
	n := 0
	for _, inf := range pk.informers {
		for _, obj := range inf.GetIndexer().List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				c.queue.Add(Key{GVR: g, NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}})
				n++
			}
		}
	}
	return n
}

// watchErrors records watch failures for /readyz and logs them, unless
// serving says the resource is gone on purpose (its CRD was deleted): a
// watch that ends because its CRD went away is not a failure of stencil.
func (c *Controller) watchErrors(ctx context.Context, inf cache.SharedIndexInformer, serving func() bool) {
	// The error is only ever "already started"; informers are set up first.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		if !serving() || apierrors.IsNotFound(err) || errors.Is(err, context.Canceled) {
			klog.FromContext(ctx).V(2).Info("Watch ended for a resource that is no longer served", "err", err)
			return
		}
		c.health.watchFailed(time.Now())
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}
