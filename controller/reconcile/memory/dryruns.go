package memory

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// DryRuns remembers the live versions for which a dry-run apply showed
// that applying the render would change nothing, so that the question costs
// one request per change of the child or the template, not one per sync.
type DryRuns struct {
	mu   sync.Mutex
	seen map[types.UID]string // child UID -> resourceVersion/hash
}

// Has reports whether the dry run of child uid at version v agreed.
func (m *DryRuns) Has(uid types.UID, v string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[uid] == v
}

// Set records that the dry run of child uid at version v agreed.
func (m *DryRuns) Set(uid types.UID, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[types.UID]string{}
	}
	m.seen[uid] = v
}

// Forget drops a deleted child.
func (m *DryRuns) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, uid)
}

// Len is how many children a dry run is remembered for.
func (m *DryRuns) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}
