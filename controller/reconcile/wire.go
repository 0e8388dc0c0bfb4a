package reconcile

import (
	"context"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reads"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates"
)

// Wire builds the registry of cfg's entries and the reconciler over it,
// wired to each other: the one constructor "stencil run" (package
// controller) and "stencil diff" (package controller/plan) share. The
// child informers' transform and the owner kinds whose children are
// cached whole are set here, from each entry as it is published and
// served, so that neither caller closes over a reconciler that does not
// exist yet while the registry is built. ro's Served hook, when set, is
// called after; rec's Registry is set to the one built.
func Wire(ctx context.Context, ro registry.Options, rec Options, cfg *config.Config, sets []*templates.Set) (*registry.Registry, *Reconciler, error) {
	kinds := &observingKinds{}
	served := ro.Hooks.Served
	ro.Hooks.ChildTransform = kinds.transform
	ro.Hooks.Served = func(entry *registry.Parent) {
		if entry.Served {
			kinds.observe(entry.GVK.GroupKind(), entry.Set.ReadsLive())
		}
		if served != nil {
			served(entry)
		}
	}
	reg, err := registry.New(ctx, ro, cfg, sets)
	if err != nil {
		return nil, nil, err
	}
	rec.Registry = reg
	enqueue := rec.Enqueue
	rec.Reads = reads.New(ctx, reads.Options{Dynamic: ro.Dynamic, Mapper: ro.Mapper,
		Served: reg.ServesKind, Authorize: rec.Authorize, Enqueue: func(r reads.Reader) {
			if enqueue != nil {
				enqueue(Key(r))
			}
		}})
	rc := New(rec)
	rc.observingKinds = kinds
	// The kinds known before the caches fill (served entries add theirs).
	for i, res := range cfg.Resources {
		if gvk, err := ro.Mapper.KindFor(res.GVR()); err == nil {
			kinds.observe(gvk.GroupKind(), sets[i].ReadsLive())
		}
	}
	return reg, rc, nil
}
