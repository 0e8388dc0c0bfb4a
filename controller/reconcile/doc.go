// Package reconcile is stencil's reconciler: given the key of one custom
// resource, it renders the resource's children with the templates package,
// applies them with server-side apply, prunes what is no longer rendered and
// merge-patches the resource's status. It reads only from the registry's
// caches; the controller package owns the queue, the informers' handlers and
// the workers that call Sync.
//
// The choice a newcomer may question: a child is written only when it
// drifted, and drift is decided from what the API server records, never by
// comparing rendered values with stored ones (package drift explains why). The
// applied-hash annotation says whether the template output changed; the
// child's managedFields say whether another writer took a field stencil
// sets. Server-side apply is idempotent, so "always apply" would be correct,
// but every no-op apply still costs a write request and, on a large cluster,
// that is the whole API budget: a converged cluster costs zero writes on
// resync and on restart, whatever values the templates use.
package reconcile
