package reconcile

import (
	"cmp"
	"context"
	"maps"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/reconcile/transform"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates"
)

// Children that depend on each other: a render of an entry whose
// templates read live children (observed, ready, dependsOn) reads them
// from the child caches, with stencil's writes the caches have not shown
// yet put in (expectations): no request to the API server. The caches
// keep those children whole (TransformChild); a child cached lean before
// its owner's entry began to read children (a reload) is read from the
// API server once, and the next event of it refreshes the cache.

// observingKinds holds the owner kinds whose children are cached whole.
type observingKinds struct {
	kinds atomic.Pointer[map[schema.GroupKind]bool]
}

// observing reports whether children of owner kind gk are cached whole.
func (k *observingKinds) observing(gk schema.GroupKind) bool {
	m := k.kinds.Load()
	return m != nil && (*m)[gk]
}

// observe records whether the children of owner kind gk are cached whole.
func (k *observingKinds) observe(gk schema.GroupKind, reads bool) {
	for {
		old := k.kinds.Load()
		if old != nil && (*old)[gk] == reads {
			return
		}
		next := map[schema.GroupKind]bool{}
		if old != nil {
			next = maps.Clone(*old)
		}
		if reads {
			next[gk] = true
		} else {
			delete(next, gk)
		}
		if k.kinds.CompareAndSwap(old, &next) {
			return
		}
	}
}

// transform is the transform of the child informers: whole for the
// children of an owner kind whose entry reads live children, else lean
// (transform.Lean).
func (k *observingKinds) transform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if ref := metav1.GetControllerOf(u); ref != nil {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && k.observing(gv.WithKind(ref.Kind).GroupKind()) {
			return transform.Whole(u), nil
		}
	}
	return transform.Lean(u)
}

// ObserveKind says whether the children of owner kind gk are cached
// whole: reads is whether its entry's templates read live children. Wire
// calls it for each entry as it is published and served (its kind is
// known then).
func (c *Reconciler) ObserveKind(gk schema.GroupKind, reads bool) {
	c.observingKinds.observe(gk, reads)
}

// Rules answer what a render asks of a live child besides the child itself
// (templates.Live's Ready and Current), as the controller decides them;
// "stencil render --observed" asks the same.
type Rules struct {
	// Revision is stamped on each child before it is hashed, where the
	// entry stamps it (revisionOnChildren); empty elsewhere.
	Revision string
}

// Ready applies stencil's readiness rules (kstatus) to a live child.
func (Rules) Ready(u *unstructured.Unstructured) bool {
	return status.ReadinessOf(u).OK
}

// Current reports whether live already is want's render (drift.Current); a
// child without stencil's applied hash counts as current.
func (r Rules) Current(want, live *unstructured.Unstructured) bool {
	return drift.Current(want, live, r.Revision)
}

// Observed is templates.Live over given objects, as "stencil render
// --observed" and "stencil test" give them: those in namespace ns (an
// object that names none is in defaultNS, as kubectl apply would put it),
// by kind and name, with the controller's rules.
func Observed(objs []*unstructured.Unstructured, ns, defaultNS string) templates.Live {
	l := observedObjects{children: map[string]*unstructured.Unstructured{}}
	for _, o := range objs {
		if cmp.Or(o.GetNamespace(), defaultNS) == ns {
			l.children[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	return l
}

// observedObjects is Observed's templates.Live.
type observedObjects struct {
	Rules
	children map[string]*unstructured.Unstructured
}

// Child returns the object of that kind and name.
func (l observedObjects) Child(kind, name string) (*unstructured.Unstructured, bool) {
	u, ok := l.children[kind+"/"+name]
	return u, ok
}

// liveChildren is templates.Live over one resource's cached children.
type liveChildren struct {
	Rules
	ctx      context.Context
	c        *Reconciler
	children map[string]ownedChild
}

// liveChildrenOf collects parent's children as the caches (and stencil's
// own writes) show them.
func (c *Reconciler) liveChildrenOf(ctx context.Context, entry *registry.Parent, parent *unstructured.Unstructured) *liveChildren {
	l := &liveChildren{ctx: ctx, c: c, children: map[string]ownedChild{}}
	if c.revisionOnChildren(entry) {
		l.Revision = entry.Set.Revision()
	}
	for _, oc := range c.ownedChildren(parent) {
		l.children[oc.obj.GetKind()+"/"+oc.obj.GetName()] = oc
	}
	return l
}

// Child returns the live child of that kind and name.
func (l *liveChildren) Child(kind, name string) (*unstructured.Unstructured, bool) {
	oc, ok := l.children[kind+"/"+name]
	if !ok {
		return nil, false
	}
	if !transform.IsLean(oc.obj) {
		return oc.obj, true
	}
	whole, err := l.c.readWhole(l.ctx, oc.childKind, oc.obj)
	if err != nil {
		// Not read: the template waits, and the child's next event, or
		// the resync, brings it back.
		klog.FromContext(l.ctx).V(2).Info("Reading a child a template observes failed", "kind", kind, "child", klog.KObj(oc.obj), "err", err)
		return nil, false
	}
	oc.obj = whole
	l.children[kind+"/"+name] = oc
	return whole, true
}

// readWhole reads a child from the API server, as a template sees it.
func (c *Reconciler) readWhole(ctx context.Context, childKind *registry.Child, cached *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u, err := c.opts.Dynamic.Resource(childKind.GVR).Namespace(cached.GetNamespace()).Get(ctx, cached.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return transform.Whole(u), nil
}

// TransformChild is the transform of the child informers (Wire sets it):
// whole for the children of an owner kind whose entry reads live
// children, else lean (transform.Lean).
func (c *Reconciler) TransformChild(obj any) (any, error) { return c.observingKinds.transform(obj) }
