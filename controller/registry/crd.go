package registry

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
)

// A CRD event's path through the registry, file by file: here, the CRD
// informer's event runs refresh, which reads the stripped CRD cache for
// each configured resource (served, and at which kind); parents.go starts
// or stops that resource's informers; children.go resolves the child kinds
// that waited for a CRD. reconfigure.go is the other way in: a new config,
// prepared outside the lock and committed whole.

// CRDResource is the resource of the CRD objects the registry watches.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdKey is the cache key of res's CRD: its name is always <plural>.<group>.
func crdKey(res config.Resource) string { return res.Resource + "." + res.Group }

// ServedKind looks res up in crds, a cache of CRDs stripped by StripCRD:
// the Kind its CRD serves at res's version, and whether the CRD is
// Established, not being deleted, and serves that version.
func ServedKind(crds cache.Store, res config.Resource) (string, bool) {
	obj, exists, err := crds.GetByKey(crdKey(res))
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

// StatusSchema returns, from crds (stripped by StripCRD), the status schema
// of res's CRD at its version, and whether there is one to prune by.
func StatusSchema(crds cache.Store, res config.Resource) (map[string]any, bool) {
	obj, exists, err := crds.GetByKey(crdKey(res))
	if err != nil || !exists {
		return nil, false
	}
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == res.Version {
			s, ok := m["statusSchema"].(map[string]any)
			return s, ok
		}
	}
	return nil, false
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

// StripCRD, an informer transform, keeps the few fields of a CRD the
// registry reads: a CRD's schema can be hundreds of kilobytes, and a
// cluster may hold hundreds of CRDs. Of the schema it keeps each version's
// status schema (see statusSchemaOf).
func StripCRD(obj any) (any, error) {
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var versions []any
	vs, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			// The transform may see an object it already stripped (client-go
			// asks it to be idempotent): keep what it kept then.
			schema, stripped := m["statusSchema"]
			if !stripped {
				schema = statusSchemaOf(m)
			}
			versions = append(versions, map[string]any{"name": m["name"], "served": m["served"], "statusSchema": schema})
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
	md := map[string]any{"name": crd.GetName(), "resourceVersion": crd.GetResourceVersion(), "uid": string(crd.GetUID()), "generation": crd.GetGeneration()}
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

// crdServes reports whether the CRD behind entry is Established and serves its
// version, from the CRD cache, and the Kind it serves.
func (r *Registry) crdServes(entry *Parent) bool {
	if entry.Builtin {
		return true
	}
	_, ok := r.servedKind(entry.Res)
	return ok
}

// servedKind looks res up in the CRD cache.
func (r *Registry) servedKind(res config.Resource) (string, bool) {
	return ServedKind(r.crds.GetIndexer(), res)
}

// StatusSchema returns the status schema of entry's CRD at its version from
// the CRD cache, and whether there is one to prune by.
func (r *Registry) StatusSchema(entry *Parent) (map[string]any, bool) {
	if entry.Builtin || r.crds == nil {
		return nil, false
	}
	return StatusSchema(r.crds.GetIndexer(), entry.Res)
}

// newCRDInformer watches the CRD objects; every change re-evaluates which
// configured resources are served.
func (r *Registry) newCRDInformer(ctx context.Context) error {
	r.crds = dynamicinformer.NewFilteredDynamicInformer(r.opts.Dynamic, CRDResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := r.crds.SetTransform(StripCRD); err != nil {
		return fmt.Errorf("CRD informer: %w", err)
	}
	refresh := func(any) { r.refresh(ctx) }
	if _, err := r.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refresh,
		UpdateFunc: func(_, cur any) { refresh(cur) },
		DeleteFunc: refresh,
	}); err != nil {
		return fmt.Errorf("CRD informer: %w", err)
	}
	r.watchErrors(ctx, r.crds, func() bool { return true }, nil, "")
	return nil
}

// refresh brings every configured resource's informers in line with what
// the API server serves: it starts the newly served, stops the no longer
// served, and logs and records each change once. It reads only the CRD
// cache under the lock; a child kind still waiting to be served is looked
// up in discovery afterwards, outside it (resolveWaiting).
func (r *Registry) refresh(ctx context.Context) {
	if !r.crds.HasSynced() {
		return
	}
	r.mu.Lock()
	for g, entry := range r.resources {
		r.refreshLocked(ctx, g, entry)
	}
	lookup := len(r.waitingKinds) > 0
	if lookup && r.reconfiguring {
		// The reload in progress owns the child kinds until it commits or
		// is refused; it looks again then.
		r.recheck, lookup = true, false
	}
	r.mu.Unlock()
	if lookup {
		r.resolveWaiting(ctx)
	}
}

// refreshLocked re-evaluates one resource; r.mu is held.
func (r *Registry) refreshLocked(ctx context.Context, g schema.GroupVersionResource, entry *Parent) {
	logger := klog.FromContext(ctx)
	served, kind := true, entry.GVK.Kind
	if !entry.Builtin {
		kind, served = r.servedKind(entry.Res)
	}
	next := *entry
	switch {
	case served && (!entry.Served || kind != entry.GVK.Kind):
		if entry.Served {
			delete(r.byKind, entry.GVK.GroupKind())
		}
		next.Served, next.GVK.Kind = true, kind
		r.byKind[next.GVK.GroupKind()] = g
		logger.Info("Serving resource", "gvr", g.String(), "kind", kind)
	case !served && entry.Served:
		next.Served = false
		delete(r.byKind, entry.GVK.GroupKind())
		logger.Info("Stopped serving resource: its CRD is gone or no longer serves this version", "gvr", g.String())
	case !served && !entry.waitLogged():
		logger.Info("Waiting for CRD", "gvr", g.String(), "crd", g.Resource+"."+g.Group)
	}
	r.served(&next)
	r.relistOnSchemaChangeLocked(ctx, g, entry, &next)
	if r.runCtx != nil {
		switch {
		case next.Served && next.stop == nil:
			r.startParentLocked(&next)
		case !next.Served && next.stop != nil:
			next.stop()
			next.stop = nil
			// A stopped informer cannot run again: make fresh ones for
			// when the CRD comes back.
			if err := r.makeParentInformers(ctx, &next, nil); err != nil {
				logger.Error(err, "Preparing informers", "gvr", g.String())
			}
		}
	}
	next.logged = true
	r.resources[g] = &next
}
