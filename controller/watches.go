package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/registry"
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

// newParentKind builds the entry for res of the config at path, with
// informers not yet running. gate, when not nil, holds the informers' watch
// errors until the config they were built for is committed.
func (c *Controller) newParentKind(ctx context.Context, path string, res gvr.Resource, set *templates.Set, gate *pending) (*parentKind, error) {
	g := res.GVR()
	pk := &parentKind{res: res, set: set, label: g.GroupResource().String(), builtin: builtinGroup(res.Group),
		gvk: schema.GroupVersionKind{Group: res.Group, Version: res.Version}}
	if pk.builtin {
		gvk, err := c.opts.Mapper.KindFor(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: the API server does not serve this built-in resource: %w", path, g, err)
		}
		pk.gvk, pk.served = gvk, true
	}
	if err := c.makeParentInformers(ctx, pk, gate); err != nil {
		return nil, err
	}
	return pk, nil
}

// makeParentInformers gives pk a fresh set of informers: an informer that
// was stopped cannot run again. gate is newParentKind's.
func (c *Controller) makeParentInformers(ctx context.Context, pk *parentKind, gate *pending) error {
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
		c.watchErrors(ctx, inf, func() bool { return c.crdServes(pk) }, gate, g.GroupResource().String())
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

// servedKind looks res up in the CRD cache.
func (c *Controller) servedKind(res gvr.Resource) (string, bool) {
	return registry.ServedKind(c.crds.GetIndexer(), res)
}

// statusSchema returns the status schema of pk's CRD at its version from
// the CRD cache, and whether there is one to prune by.
func (c *Controller) statusSchema(pk *parentKind) (map[string]any, bool) {
	if pk.builtin || c.crds == nil {
		return nil, false
	}
	return registry.StatusSchema(c.crds.GetIndexer(), pk.res)
}

// newCRDInformer watches the CRD objects; every change re-evaluates which
// configured resources are served.
func (c *Controller) newCRDInformer(ctx context.Context) error {
	c.crds = dynamicinformer.NewFilteredDynamicInformer(c.opts.Dynamic, registry.CRDResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := c.crds.SetTransform(registry.StripCRD); err != nil {
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
	c.watchErrors(ctx, c.crds, func() bool { return true }, nil, "")
	return nil
}

// refresh brings every configured resource's informers in line with what
// the API server serves: it starts the newly served, stops the no longer
// served, and logs and records each change once. It reads only the CRD
// cache under the lock; a child kind still waiting to be served is looked
// up in discovery afterwards, outside it (resolveWaiting).
func (c *Controller) refresh(ctx context.Context) {
	if !c.crds.HasSynced() {
		return
	}
	c.mu.Lock()
	for g, pk := range c.resources {
		c.refreshLocked(ctx, g, pk)
	}
	lookup := len(c.waitingKinds) > 0
	if lookup && c.reloading {
		// The reload in progress owns the child kinds until it commits or
		// is refused; it looks again then.
		c.recheck, lookup = true, false
	}
	c.mu.Unlock()
	if lookup {
		c.resolveWaiting(ctx)
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
			if err := c.makeParentInformers(ctx, &next, nil); err != nil {
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

func (c *Controller) precreateLocked(pk *parentKind) {
	var names []string
	for _, k := range pk.set.Kinds() {
		names = append(names, k.Kind)
	}
	c.opts.Metrics.precreate(pk.label, names)
	if pk.res.Rollout != nil {
		c.opts.Metrics.precreateRollout(pk.label)
	}
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
// While gate is not nil and its config not committed, the errors are the
// reload's to report (under name), not the running replica's.
func (c *Controller) watchErrors(ctx context.Context, inf cache.SharedIndexInformer, serving func() bool, gate *pending, name string) {
	// The error is only ever "already started"; informers are set up first.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		if gate != nil && !gate.committed.Load() {
			gate.record(name, err)
			klog.FromContext(ctx).V(2).Info("Watch failed for an informer of a config not yet committed", "resource", name, "err", err)
			return
		}
		if !serving() || apierrors.IsNotFound(err) || errors.Is(err, context.Canceled) {
			klog.FromContext(ctx).V(2).Info("Watch ended for a resource that is no longer served", "err", err)
			return
		}
		c.health.watchFailed(time.Now())
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}
