package controller

import "stencil.dev/stencil/controller/registry"

// What "stencil diff" shares with the controller, so that its plan is made
// the way sync makes its writes: DryRunApply (drift.go), TemplateStatus
// (status.go), and the two below.

// AnnotationAppliedHash is the annotation on each child holding a hash of
// the render stencil last applied; it is bookkeeping, not a change a person
// reviews.
const AnnotationAppliedHash = annotationAppliedHash

// ScopeNamespaces returns the namespaces an entry covers under the
// --namespace flag: "" means all; an empty result means none.
func ScopeNamespaces(flagNS string, entry []string) []string {
	return registry.ScopeNamespaces(flagNS, entry)
}
