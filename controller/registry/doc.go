// Package registry is the watch registry: what stencil watches, and how
// that changes. It holds the configured resources, each with its templates
// and informers, started while its CRD is Established and serves the
// configured version and stopped when it goes; the child kinds with their
// label-filtered caches and names caches; the CRD informer that says which
// resources are served and what each one's status schema accepts; and the
// reload: a new config is prepared (its informers built, started and
// synced) outside the lock, then committed in one step or discarded, so a
// refused reload changes nothing; whether stencil's RBAC allows the new
// config is asked before, by the controller (package controller/access).
// The package never imports controller: the event handlers, cache
// transforms and metrics come in through Hooks.
//
// The files, in the order a CRD event goes through them: crd.go (the CRD
// informer, refresh, the stripped CRD cache), parents.go (configured
// resources, whose informers start and stop with their CRDs), children.go
// (child kinds, those waiting for a CRD resolved). Beside them:
// registry.go (the Registry, its accessors and cache lookups), reconfigure.go
// (prepare, commit, discard), schema.go (status pruning by schema),
// shard.go (a ring member's share-limited informers and Reshard).
//
// The choice a newcomer may question: which resources are served comes
// from an informer on the CRD objects, stripped to a few fields, not from
// discovery. A change is seen within one watch event, costs nothing while
// nothing changes, and needs no request to the API server (no network call
// while the registry's lock is held); discovery stays for the built-in
// resources and the child kinds, which have no CRD of their own to watch,
// and runs outside the lock.
package registry
