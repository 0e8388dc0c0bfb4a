package memory

import (
	"sync"
	"time"
)

// TerminatingTTL is how long a namespace the API server called terminating
// is left alone. Its deletion usually ends well within it (and takes the
// resources with it); a resource still there afterwards is tried once more.
const TerminatingTTL = time.Minute

// Terminating remembers the namespaces in which the API server
// refused a write because they are being deleted (NamespaceTerminating).
// Without it, each child the namespace controller deletes wakes its parent,
// whose next sync tries to re-create the child into the same refusal: one
// more refused write per child. Stencil does not watch namespaces (that
// would be a cluster-wide list permission for this alone); the refusal is
// the signal, and it expires so that a namespace re-created under the same
// name is served again.
type Terminating struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// Mark records that ns was found terminating now.
func (t *Terminating) Mark(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since == nil {
		t.since = map[string]time.Time{}
	}
	t.since[ns] = time.Now()
}

// Left reports whether ns was found terminating less than TerminatingTTL
// ago, and how long until that expires.
func (t *Terminating) Left(ns string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.since[ns]
	if !ok {
		return 0, false
	}
	left := TerminatingTTL - time.Since(at)
	if left <= 0 {
		delete(t.since, ns)
		return 0, false
	}
	return left, true
}
