package memory

import (
	"crypto/sha256"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates"
)

// RenderFailures remembers, per resource, the render that failed: a render
// is a function of the resource's spec and metadata and of the templates,
// so while neither changes it fails the same way again. A resource past
// its render budget would otherwise spend the whole budget (about half a
// second of a worker) on every event of its children; with the memo it is
// rendered once per spec, label, annotation or template change, and again
// at the periodic resync, as the refusal memo does for children the API
// server refuses. Status, which stencil writes, is not part of the key: the
// failure's own status patch must not make it render again.
type RenderFailures struct {
	// states holds each resource's failed render (memory.go).
	states *States
}

// renderFailure is one failed render: what it was of, and its error.
type renderFailure struct {
	input [sha256.Size]byte
	set   *templates.Set
	err   error
}

// renderInput fingerprints what a render reads of parent, status aside.
func renderInput(parent *unstructured.Unstructured) [sha256.Size]byte {
	b, _ := json.Marshal([]any{parent.GetUID(), parent.GetGeneration(), parent.GetLabels(), parent.GetAnnotations(), parent.Object["spec"]})
	return sha256.Sum256(b)
}

// Get returns the error the same render failed with, or nil.
func (m RenderFailures) Get(key Key, entry *registry.Parent, parent *unstructured.Unstructured) (err error) {
	m.states.view(key, func(st *resourceState) {
		if st != nil && st.render != nil && st.render.set == entry.Set && st.render.input == renderInput(parent) {
			err = st.render.err
		}
	})
	return err
}

// Set remembers a failed render.
func (m RenderFailures) Set(key Key, entry *registry.Parent, parent *unstructured.Unstructured, err error) {
	m.states.update(key, func(st *resourceState) {
		st.render = &renderFailure{input: renderInput(parent), set: entry.Set, err: err}
	})
}

// Forget drops key's failure: it rendered.
func (m RenderFailures) Forget(key Key) {
	m.states.change(key, func(st *resourceState) { st.render = nil })
}

// Reset drops every failure: the periodic resync renders them all again.
func (m RenderFailures) Reset() {
	m.states.each(func(st *resourceState) { st.render = nil })
}
