package ha

import (
	"sync"
	"sync/atomic"
)

// Tripwire is a fence's one-way switch, for the leader's Lease and a ring
// member's alike: once tripped it is never cleared (a leadership or a
// membership that went stale once is over), and the first trip runs the
// fence's onTrip, which stops the workers at once.
type Tripwire struct {
	tripped atomic.Bool
	once    sync.Once
}

// Trip sets the wire and, the first time, runs onTrip (nil: nothing).
func (w *Tripwire) Trip(onTrip func()) {
	w.tripped.Store(true)
	if onTrip != nil {
		w.once.Do(onTrip)
	}
}

// Tripped reports whether the wire was set.
func (w *Tripwire) Tripped() bool { return w.tripped.Load() }
