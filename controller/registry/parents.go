package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
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

// Parent is one configured resource, an entry of the config (a value of it
// is called entry), and its informers. It is replaced,
// never changed, once published: a sync holds the version it started with.
type Parent struct {
	// Res is the config entry, Set its templates.
	Res config.Resource
	Set *templates.Set
	// GVK is the resource's kind; Kind is empty until it is served.
	GVK schema.GroupVersionKind
	// Label names the resource in metrics: resource.group.
	Label string
	// Builtin resources are served by the API server itself, not by a CRD.
	Builtin bool
	// Served: the API server serves the resource at the configured version.
	Served bool
	// Informers by namespace ("" watches all namespaces); created with the
	// Parent, run only while served.
	Informers map[string]cache.SharedIndexInformer
	// stop ends the informers; nil while they do not run.
	stop context.CancelFunc
	// logged: the resource's state was logged once ("Waiting for CRD").
	logged bool
	// crdGeneration is the generation of its CRD when last looked at
	// (relist.go); 0 before the CRD was seen.
	crdGeneration int64
}

// Running reports whether the resource's informers run.
func (entry *Parent) Running() bool { return entry.stop != nil }

// Child is one allowed child kind (a value of it is called childKind) and
// its informers.
type Child struct {
	// GVK and GVR name the kind and its resource.
	GVK schema.GroupVersionKind
	GVR schema.GroupVersionResource
	// Informers cache stencil's children (label-filtered), by namespace.
	Informers map[string]cache.SharedIndexInformer
	// Names cache the name and UID of every object of the kind, by
	// namespace (metadata only, stripped): whether a name is taken by a
	// foreign object is known without a request. Nil without
	// Options.Metadata.
	Names map[string]cache.SharedIndexInformer
}

// NameTaken reports whether the names cache holds an object ns/name.
func NameTaken(names map[string]cache.SharedIndexInformer, ns, name string) bool {
	inf := InformerFor(names, ns)
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
func (r *Registry) newParentKind(ctx context.Context, path string, res config.Resource, set *templates.Set, gate *pending) (*Parent, error) {
	g := res.GVR()
	entry := &Parent{Res: res, Set: set, Label: g.GroupResource().String(), Builtin: builtinGroup(res.Group),
		GVK: schema.GroupVersionKind{Group: res.Group, Version: res.Version}}
	if entry.Builtin {
		gvk, err := r.opts.Mapper.KindFor(g)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: the API server does not serve this built-in resource: %w", path, g, err)
		}
		entry.GVK, entry.Served = gvk, true
	}
	if err := r.makeParentInformers(ctx, entry, gate); err != nil {
		return nil, err
	}
	return entry, nil
}

// makeParentInformers gives entry a fresh set of informers: an informer that
// was stopped cannot run again. gate is newParentKind's.
func (r *Registry) makeParentInformers(ctx context.Context, entry *Parent, gate *pending) error {
	if err := r.newParentInformers(ctx, entry, gate); err != nil {
		return err
	}
	return r.addParentHandlers(entry)
}

// addParentHandlers adds the ParentHandler hook to entry's informers; on
// an informer already running, the handler is first told of every object
// its cache holds.
func (r *Registry) addParentHandlers(entry *Parent) error {
	h := r.opts.Hooks.ParentHandler
	if h == nil {
		return nil
	}
	g := entry.Res.GVR()
	for _, inf := range entry.Informers {
		if _, err := inf.AddEventHandler(h(g)); err != nil {
			return fmt.Errorf("adding event handler for %s: %w", g, err)
		}
	}
	return nil
}

// newParentInformers makes entry's informers, without the event handler.
func (r *Registry) newParentInformers(ctx context.Context, entry *Parent, gate *pending) error {
	g := entry.Res.GVR()
	entry.Informers = map[string]cache.SharedIndexInformer{}
	namespaces := ScopeNamespaces(r.opts.Namespace, entry.Res.Namespaces)
	if len(namespaces) == 0 {
		klog.FromContext(ctx).Info("Resource not watched: none of its namespaces is in --namespace",
			"gvr", g.String(), "namespace", r.opts.Namespace)
	}
	selector := entry.Res.LabelSelector().String()
	for _, ns := range namespaces {
		inf := r.newInformer(g, ns, selector, cache.Indexers{})
		if t := r.opts.Hooks.ParentTransform; t != nil {
			if err := inf.SetTransform(t); err != nil {
				return fmt.Errorf("informer for %s: %w", g, err)
			}
		}
		r.watchErrors(ctx, inf, func() bool { return r.crdServes(entry) }, gate, g.GroupResource().String())
		entry.Informers[ns] = inf
	}
	return nil
}

// waitLogged reports whether "Waiting for CRD" was logged already.
func (entry *Parent) waitLogged() bool { return entry.logged }

// startParentLocked runs entry's informers under the workers' context.
func (r *Registry) startParentLocked(entry *Parent) {
	ctx, cancel := context.WithCancel(r.runCtx)
	entry.stop = cancel
	for _, inf := range entry.Informers {
		r.run(ctx, inf)
	}
}

// watchErrors records watch failures for /readyz and logs them, unless
// serving says the resource is gone on purpose (its CRD was deleted): a
// watch that ends because its CRD went away is not a failure of stencil.
// While gate is not nil and its config not committed, the errors are the
// reload's to report (under name), not the running replica's.
func (r *Registry) watchErrors(ctx context.Context, inf cache.SharedIndexInformer, serving func() bool, gate *pending, name string) {
	// The error is only ever "already started"; informers are set up first.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, refl *cache.Reflector, err error) {
		if gate != nil && !gate.committed.Load() {
			gate.record(name, err)
			klog.FromContext(ctx).V(2).Info("Watch failed for an informer of a config not yet committed", "resource", name, "err", err)
			return
		}
		if !serving() || apierrors.IsNotFound(err) || errors.Is(err, context.Canceled) {
			klog.FromContext(ctx).V(2).Info("Watch ended for a resource that is no longer served", "err", err)
			return
		}
		if r.opts.Hooks.WatchFailed != nil {
			r.opts.Hooks.WatchFailed(time.Now())
		}
		cache.DefaultWatchErrorHandler(ctx, refl, err)
	})
}
