package reconcile

import (
	"maps"
	"sync"
)

// What stencil remembers of each custom resource between its syncs lives
// in one place: one map keyed by Key, one lock, one forget, whether the
// resource is deleted or its entry leaves the config. The fight guard, the
// status memo, the refusal memo and the render failures are views of it
// (guard.go, statuspatch.go, refusals.go, renderfailures.go). Everything here is
// a memo or a rate limit: losing it (a restart) costs at most a request,
// never a wrong write. The rollout state is the entry's, not one
// resource's (rolloutgate.go); the expectations are per child (package expect).

// resourceState is what stencil remembers of one resource.
type resourceState struct {
	// fight is its fight episode and correction budget (guard.go).
	fight *fightState
	// status is the last status patch sent and what the server stored
	// (statuspatch.go); sent says whether there was one.
	status [2]string
	sent   bool
	// refused are the children the API server refused (refusals.go).
	refused map[childRef]refusal
	// render is the render that failed, not run again (renderfailures.go).
	render *renderFailure
	// hooksWarned is the generation whose chart hooks a Warning event
	// listed (sync.go, warnHooks); 0: none.
	hooksWarned int64
}

// empty reports whether nothing is remembered.
func (s *resourceState) empty() bool {
	return s.fight == nil && !s.sent && len(s.refused) == 0 && s.render == nil && s.hooksWarned == 0
}

// resourceStates holds the state of every resource.
type resourceStates struct {
	mu sync.Mutex
	m  map[Key]*resourceState
}

// update runs f on key's state under the lock, creating it; a state left
// empty is dropped.
func (s *resourceStates) update(key Key, f func(*resourceState)) {
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
func (s *resourceStates) view(key Key, f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.m[key])
}

// forget drops everything remembered of a deleted resource.
func (s *resourceStates) forget(key Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// retain drops everything remembered of each resource keep rejects.
func (s *resourceStates) retain(keep func(Key) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.DeleteFunc(s.m, func(k Key, _ *resourceState) bool { return !keep(k) })
}

// each runs f on every state under the lock, then drops the states left
// empty.
func (s *resourceStates) each(f func(*resourceState)) {
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
func (s *resourceStates) change(key Key, f func(*resourceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.m[key]; st != nil {
		if f(st); st.empty() {
			delete(s.m, key)
		}
	}
}
