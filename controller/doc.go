// Package controller is stencil's reconciler: it watches every configured
// custom resource through dynamic informers, renders each one's children with
// the templates package, applies them with server-side apply, prunes what is
// no longer rendered and merge-patches the resource's status.
//
// The choice a newcomer may question: a child is written only when the live
// object lacks a field the template sets, or when the rendered object changed
// since the last apply (tracked by a hash annotation). Server-side apply is
// idempotent, so "always apply" would be correct, but every no-op apply still
// costs a write request and, on a large cluster, that is the whole API budget.
// Comparing against the informer cache makes a converged cluster cost zero
// writes on resync and on restart.
package controller
