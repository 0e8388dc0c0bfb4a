// Package registry is what stencil watches: the CRDs that come and go, and
// what a reload needs before it may start anything. It is the first part of
// the watch registry to leave package controller; the informers per
// resource and child kind, and the reload's prepare and commit, still live
// there (watches.go, children.go, reconfigure.go) and follow. The package
// never imports controller: what it needs of it comes in as arguments.
//
// Today it holds three pieces, each a function of its inputs:
//
//   - crd.go reads the CRD cache: StripCRD keeps the few fields stencil
//     reads of a CRD, ServedKind says whether a configured resource is
//     served, StatusSchema what its status accepts.
//   - schema.go prunes a status by that schema, as the API server would.
//   - access.go asks, with SelfSubjectAccessReviews, whether stencil may do
//     what a new config adds, before the reload starts any of it.
//
// The choice a newcomer may question: which resources are served comes
// from an informer on the CRD objects, stripped to a few fields, not from
// discovery. A change is seen within one watch event, costs nothing while
// nothing changes, and needs no request to the API server (no network call
// while the registry's lock is held); discovery stays for the built-in
// resources and the child kinds, which have no CRD of their own to watch.
package registry
