package controller

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/templates"
)

// renderFailures remembers, per resource, the render that failed: a render
// is a function of the resource's spec and metadata and of the templates,
// so while neither changes it fails the same way again. A resource past
// its render budget would otherwise spend the whole budget (about half a
// second of a worker) on every event of its children; with the memo it is
// rendered once per spec, label, annotation or template change, and again
// at the periodic resync, as the refusal memo does for children the API
// server refuses. Status, which stencil writes, is not part of the key: the
// failure's own status patch must not make it render again.
type renderFailures struct {
	mu     sync.Mutex
	failed map[Key]renderFailure
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

// get returns the error the same render failed with, or nil.
func (m *renderFailures) get(key Key, pk *registry.Parent, parent *unstructured.Unstructured) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.failed[key]
	if !ok || f.set != pk.Set || f.input != renderInput(parent) {
		return nil
	}
	return f.err
}

// set remembers a failed render.
func (m *renderFailures) set(key Key, pk *registry.Parent, parent *unstructured.Unstructured, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = map[Key]renderFailure{}
	}
	m.failed[key] = renderFailure{input: renderInput(parent), set: pk.Set, err: err}
}

// forget drops key's failure: it rendered, or is gone.
func (m *renderFailures) forget(key Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failed, key)
}

// retain drops the failure of every resource keep rejects.
func (m *renderFailures) retain(keep func(Key) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	retainKeys(m.failed, keep)
}

// reset drops every failure: the periodic resync renders them all again.
func (m *renderFailures) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.failed)
}
