// Package transform holds the informer transforms: what stencil's caches
// keep of each object.
//
// The choice a newcomer may question: the caches are lean. The informers
// keep only what stencil reads. Drift is decided
// from the applied hash and managedFields, never by comparing values, so a
// child's content is not needed in the cache, except the few spec fields
// and the status that readiness (kstatus) reads: pod templates, ConfigMap
// and Secret data, annotations other than the applied hash, and condition
// timestamps go, and the managedFields field sets are kept as JSON text,
// decoded only when a sync needs them. A custom resource keeps its spec (it
// is rendered) but only stencil's own managedFields entries. The rare path
// that needs a whole child (the dry-run comparison) reads it from the API
// server.
//
// The children of an entry whose templates read them (observed, ready,
// dependsOn) are the exception: Whole keeps them as templates see them.
package transform
