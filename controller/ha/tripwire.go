package ha

import (
	"sync"
	"sync/atomic"
)

// tripwire is a fence's one-way switch, for the leader's Lease and a ring
// member's alike: once tripped it is never cleared (a leadership or a
// membership that went stale once is over), and the first trip runs the
// fence's onTrip, which stops the workers at once.
type tripwire struct {
	tripped atomic.Bool
	once    sync.Once
}

// trip sets the wire and, the first time, runs onTrip (nil: nothing).
func (w *tripwire) trip(onTrip func()) {
	w.tripped.Store(true)
	if onTrip != nil {
		w.once.Do(onTrip)
	}
}
