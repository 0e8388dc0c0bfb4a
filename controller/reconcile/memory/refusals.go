package memory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Refusals remembers the renders the API server refused for their content
// (invalid, too large), per custom resource and child, so that
// the same object is sent once, not once per sync. A resource is synced again
// by every event of its children (a sibling's status written by its own
// controller, say), and each of those syncs would otherwise send the refused
// object again: the fault suite's bad-input scenario counted 3 to 4 sends
// per refused child before this memo, depending on how many status updates
// a sibling Deployment got.
//
// A refusal stands while the render of that child (its hash) and the live
// object it was sent against (absent, or its UID and resourceVersion) stay
// the same: a new spec or template, or a child deleted or edited by hand (to
// clear an immutable field, say), sends the render again at once. The
// periodic resync clears the memo: a refusal can hinge on other objects (a
// nodePort another Service holds), so it is asked again then, not never.
type Refusals struct {
	// states holds each resource's refused children (memory.go).
	states *States
}

// refusal is one refused render of a child: its hash and the live object's
// version it was sent against, and the error the sync reports again while
// both stay the same.
type refusal struct {
	hash, against string
	err           error
}

// LiveVersion names the live object a render is sent against: "" when none
// exists, else its UID and resourceVersion.
func LiveVersion(live *unstructured.Unstructured) string {
	if live == nil {
		return ""
	}
	return string(live.GetUID()) + "/" + live.GetResourceVersion()
}

// Get returns the error the render of child with hash was refused with
// against the live version against, or nil when it was not.
func (m Refusals) Get(key Key, child Child, hash, against string) (err error) {
	m.states.view(key, func(st *resourceState) {
		if st == nil {
			return
		}
		if r, ok := st.refused[child]; ok && r.hash == hash && r.against == against {
			err = r.err
		}
	})
	return err
}

// Set records that the render of child with hash, sent against the live
// version against, was refused with err.
func (m Refusals) Set(key Key, child Child, hash, against string, err error) {
	m.states.update(key, func(st *resourceState) {
		if st.refused == nil {
			st.refused = map[Child]refusal{}
		}
		st.refused[child] = refusal{hash: hash, against: against, err: err}
	})
}

// Clear drops the refusal of child, once a render of it was written.
func (m Refusals) Clear(key Key, child Child) {
	m.states.change(key, func(st *resourceState) { delete(st.refused, child) })
}

// Reset drops every refusal: the periodic resync asks the API server again.
func (m Refusals) Reset() {
	m.states.each(func(st *resourceState) { st.refused = nil })
}
