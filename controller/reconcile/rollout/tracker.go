// Package rollout is the state machine of a rollout: one entry's move of
// its resources to a new revision of its templates, at most maxInFlight at
// a time, halted once maxFailed of the moved ones fail. The reconciler
// feeds it what the caches say of each resource (Observe), asks it whether
// a resource may be rendered now (Admit), and wakes the ones it names
// (Next).
//
// The choice a newcomer may question: a Tracker keeps nothing that the
// cluster does not also say. Where each resource stands is read back from
// its status and children (the reconcile package's rolloutStateOf), and a
// Tracker is rebuilt from the caches whenever the revision is first seen
// (a start, a reload, a restart), so a halted rollout stays halted across
// restarts without any state of its own being stored.
package rollout

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// State is where one resource of a rollout entry stands.
type State int

const (
	// NoChildren: no children yet; rendered at once.
	NoChildren State = iota
	// Pending: its children are on another revision; it waits.
	Pending
	// Rolling: moved, not every child Ready yet.
	Rolling
	// Done: moved, every child Ready.
	Done
	// Failed: moved, a child kstatus Failed.
	Failed
)

// Reported are the states stencil_rollout_resources reports.
var Reported = []State{Pending, Rolling, Done, Failed}

// String is the state's metric label value.
func (s State) String() string {
	return [...]string{"new", "pending", "rolling", "done", "failed"}[s]
}

// Moved reports whether the resource is on the rollout's revision.
func (s State) Moved() bool { return s >= Rolling }

// Limits are an entry's rollout bounds (config.Rollout): how many of its
// resources may move at once and how many moved may fail, for its number
// of resources. An interface, so that the tracker imports nothing of the
// config's.
type Limits interface {
	Limits(total int) (maxInFlight, maxFailed int)
	String() string
}

// Tracker tracks one entry's move to one revision of its templates. It is
// a plain state machine, fed by sync: observe what the caches say, admit a
// pending resource when a slot is free, forget a deleted one. Its methods
// are called under rollouts.mu.
type Tracker struct {
	revision string
	limits   Limits
	states   map[types.NamespacedName]State
	counts   [Failed + 1]int
	// first are the pending resources that were failing on their old
	// revision: a further config change (a fix, a revert) moves them
	// before any other. firstLeft counts those still pending.
	first     map[types.NamespacedName]bool
	firstLeft int
	// order is the order pending resources are woken in: first ones, then
	// by namespace and name; next starts at cursor.
	order  []types.NamespacedName
	cursor int
	// haltReported: the halt was logged and announced once.
	haltReported bool
}

// Start starts a rollout to revision from the states read from the
// caches; failing names the pending resources whose children were failing.
func Start(revision string, limits Limits, states map[types.NamespacedName]State, failing map[types.NamespacedName]bool) *Tracker {
	r := &Tracker{revision: revision, limits: limits, states: map[types.NamespacedName]State{}, first: map[types.NamespacedName]bool{}}
	for k, st := range states {
		r.states[k] = st
		r.counts[st]++
		if st == Pending {
			r.order = append(r.order, k)
			if failing[k] {
				r.first[k] = true
				r.firstLeft++
			}
		}
	}
	slices.SortFunc(r.order, func(a, b types.NamespacedName) int {
		if r.first[a] != r.first[b] {
			if r.first[a] {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return r
}

// Maxes returns the limits for the entry's current number of resources.
func (r *Tracker) Maxes() (maxInFlight, maxFailed int) {
	return r.limits.Limits(len(r.states))
}

// set moves key to st, keeping the counts.
func (r *Tracker) set(key types.NamespacedName, st State) {
	if prev, ok := r.states[key]; ok {
		r.counts[prev]--
		if prev == Pending && r.first[key] {
			r.firstLeft--
		}
	}
	r.states[key] = st
	r.counts[st]++
}

// Observe records what the caches say of key and returns its state. Once
// Moved, a resource never counts as pending again: right after its move
// the caches may still show its old children.
func (r *Tracker) Observe(key types.NamespacedName, st State) State {
	prev, known := r.states[key]
	switch {
	case known && prev.Moved() && !st.Moved():
		return prev
	case known && prev == st:
		return st
	case !known && st == Pending:
		// Created since the rollout began, with children of another
		// revision (restored from a backup): it queues last.
		r.order = append(r.order, key)
	}
	r.set(key, st)
	return st
}

// InFlight counts the moved resources not yet Ready.
func (r *Tracker) InFlight() int { return r.counts[Rolling] }

// Halted reports whether maxFailed moved resources have failed.
func (r *Tracker) Halted() bool {
	_, maxFailed := r.Maxes()
	return r.counts[Failed] >= maxFailed
}

// Admit decides whether key may be rendered now: anything but a pending
// resource may; a pending one moves (and counts as rolling) only while the
// rollout is not halted, a slot is free, and no resource that failed on
// its old revision still waits for its turn before it.
func (r *Tracker) Admit(key types.NamespacedName) bool {
	if r.states[key] != Pending {
		return true
	}
	maxInFlight, _ := r.Maxes()
	if r.Halted() || r.InFlight() >= maxInFlight || (r.firstLeft > 0 && !r.first[key]) {
		return false
	}
	r.set(key, Rolling)
	return true
}

// Forget drops a deleted (or paused) resource; its slot frees.
func (r *Tracker) Forget(key types.NamespacedName) {
	if prev, ok := r.states[key]; ok {
		r.counts[prev]--
		if prev == Pending && r.first[key] {
			r.firstLeft--
		}
		delete(r.states, key)
	}
}

// Next returns the pending resources to wake for the free slots, in order;
// none while halted.
func (r *Tracker) Next() []types.NamespacedName {
	maxInFlight, _ := r.Maxes()
	free := maxInFlight - r.InFlight()
	if free <= 0 || r.Halted() {
		return nil
	}
	for r.cursor < len(r.order) && r.states[r.order[r.cursor]] != Pending {
		r.cursor++
	}
	var wake []types.NamespacedName
	for i := r.cursor; i < len(r.order) && len(wake) < free; i++ {
		if k := r.order[i]; r.states[k] == Pending {
			wake = append(wake, k)
		}
	}
	return wake
}

// Revision is the revision of the templates the entry moves to.
func (r *Tracker) Revision() string { return r.revision }

// SetLimits takes the entry's limits as a reload changed them; the
// revision, and so the rollout, is the same.
func (r *Tracker) SetLimits(limits Limits) { r.limits = limits }

// State returns where key stands, and whether the rollout knows it.
func (r *Tracker) State(key types.NamespacedName) (State, bool) {
	st, ok := r.states[key]
	return st, ok
}

// Count returns how many resources stand at st.
func (r *Tracker) Count(st State) int { return r.counts[st] }

// FirstLeft counts the resources that were failing on their old revision
// and still wait to move, before any other.
func (r *Tracker) FirstLeft() int { return r.firstLeft }

// ReportHalt returns true once, the first time the rollout is halted with
// resources still waiting: the halt is logged and announced once.
func (r *Tracker) ReportHalt() bool {
	if !r.Halted() || r.counts[Pending] == 0 || r.haltReported {
		return false
	}
	r.haltReported = true
	return true
}
