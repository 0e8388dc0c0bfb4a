// Package memory holds what the reconciler remembers of each custom
// resource between its syncs: the fight guard's budget, the last status
// sent, the children the API server refused, the render that failed, the
// chart hooks already warned of, the namespaces found terminating, the
// dry runs that agreed, and the identities' accounts found and writes
// refused.
//
// The choice a newcomer may question: all of it is memos and rate limits,
// kept in memory only and never read back from the cluster. Losing it (a
// restart) costs at most a request, never a wrong write, which is why none
// of it needs the care the rollout's state gets (read back from status,
// package reconcile). The per-resource memos live in one map keyed by Key,
// under one lock, with one Forget, whether the resource is deleted or its
// entry leaves the config; Guard, Status, Refusals and RenderFailures are
// views of it. The expectations are per child (package expect).
package memory

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Key identifies one custom resource in the work queue. The GVR is part of the
// key because two CRDs may hold objects of the same namespace and name.
type Key struct {
	GVR schema.GroupVersionResource
	types.NamespacedName
}

// String renders the key for logs.
func (k Key) String() string {
	return k.GVR.GroupResource().String() + "/" + k.NamespacedName.String()
}

// Child names a child within one parent.
type Child struct {
	GVK  schema.GroupVersionKind
	Name string
}

// String names the child as Kind/name, as events and conditions do.
func (r Child) String() string { return r.GVK.Kind + "/" + r.Name }

// resourceState is what stencil remembers of one resource.
type resourceState struct {
	// fight is its fight episode and correction budget (guard.go).
	fight *fightState
	// status is the last status patch sent and what the server stored
	// (status.go); sent says whether there was one.
	status [2]string
	sent   bool
	// refused are the children the API server refused (refusals.go).
	refused map[Child]refusal
	// render is the render that failed, not run again (renderfailures.go).
	render *renderFailure
	// hooksWarned is the generation whose chart hooks a Warning event
	// listed (HooksWarned); 0: none.
	hooksWarned int64
	// lost counts the renders in a row whose worker was lost from
	// outside (lostworkers.go).
	lost int
}

// empty reports whether nothing is remembered.
func (s *resourceState) empty() bool {
	return s.fight == nil && !s.sent && len(s.refused) == 0 && s.render == nil && s.hooksWarned == 0 && s.lost == 0
}

// States holds the state of every resource; New makes it with its views.
type States struct {
	mu sync.Mutex
	m  map[Key]*resourceState
}

// update runs f on key's state under the lock, creating it; a state left
// empty is dropped.
func (s *States) update(key Key, f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[key]
	if st == nil {
		st = &resourceState{}
	}
	f(st)
	switch {
	case st.empty():
		delete(s.m, key)
	case s.m == nil:
		s.m = map[Key]*resourceState{key: st}
	default:
		s.m[key] = st
	}
}

// view runs f on key's state under the lock; f gets nil when there is none.
func (s *States) view(key Key, f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.m[key])
}

// Forget drops everything remembered of a deleted resource.
func (s *States) Forget(key Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Retain drops everything remembered of each resource keep rejects.
func (s *States) Retain(keep func(Key) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.m, func(k Key, _ *resourceState) bool { return !keep(k) })
}

// each runs f on every state under the lock, then drops the states left
// empty.
func (s *States) each(f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.m, func(_ Key, st *resourceState) bool {
		f(st)
		return st.empty()
	})
}

// change runs f on key's state under the lock, if there is one (every
// sync clears what it no longer needs: no state is made for that); a
// state left empty is dropped.
func (s *States) change(key Key, f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.m[key]; st != nil {
		if f(st); st.empty() {
			delete(s.m, key)
		}
	}
}

// Len is how many resources something is remembered of.
func (s *States) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// HooksWarned records that the chart hooks of generation gen of key were
// warned of, and reports whether they already were.
func (s *States) HooksWarned(key Key, gen int64) bool {
	warned := false
	s.update(key, func(st *resourceState) {
		warned = st.hooksWarned == gen
		st.hooksWarned = gen
	})
	return warned
}

// Memory is everything the reconciler remembers between syncs.
type Memory struct {
	// Resources holds the per-resource memos; the views below read it.
	Resources      *States
	Guard          *Guard
	Status         Status
	Refusals       Refusals
	RenderFailures RenderFailures
	LostWorkers    LostWorkers
	Terminating    Terminating
	DryRuns        DryRuns
	// Accounts and IdentityRefusals are the identities' memos, shared by
	// every resource of an entry (identities.go).
	Accounts         Accounts
	IdentityRefusals IdentityRefusals
}

// New makes an empty Memory whose fight guard allows burst corrections,
// then one per interval.
func New(burst int, interval time.Duration) *Memory {
	states := &States{}
	return &Memory{
		Resources:      states,
		Guard:          &Guard{burst: burst, interval: interval, now: time.Now, states: states},
		Status:         Status{states: states},
		Refusals:       Refusals{states: states},
		RenderFailures: RenderFailures{states: states},
		LostWorkers:    LostWorkers{states: states},
	}
}
