package memory

import (
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// Guard limits drift corrections per custom resource. When another
// actor keeps reverting a field stencil sets, each revert would otherwise
// cost one apply, forever; a token bucket turns that loop into a trickle and
// the resource's status says so.
//
// An episode starts with the first denied correction and lasts until no
// correction has been denied for as long as the bucket takes to refill: the
// Throttled condition stands, and one Warning event is recorded, per episode,
// not per denial or per correction that got through.
type Guard struct {
	burst    int
	interval time.Duration
	now      func() time.Time
	// states holds each resource's fightState (memory.go).
	states *States
}

type fightState struct {
	bucket     flowcontrol.RateLimiter
	lastDenied time.Time
	message    string
}

// get returns st's fightState, created with a full bucket. Called under
// the states' lock.
func (g *Guard) get(st *resourceState) *fightState {
	if st.fight == nil {
		st.fight = &fightState{bucket: flowcontrol.NewTokenBucketRateLimiter(float32(1/g.interval.Seconds()), g.burst)}
	}
	return st.fight
}

// Allow takes a token for one drift correction of the resource key.
func (g *Guard) Allow(key Key) bool {
	var ok bool
	g.states.update(key, func(st *resourceState) { ok = g.get(st).bucket.TryAccept() })
	return ok
}

// Deny records a correction held back, with the message that explains it,
// and reports whether this denial starts an episode.
func (g *Guard) Deny(key Key, message string) bool {
	var started bool
	g.states.update(key, func(st *resourceState) {
		s := g.get(st)
		started = !g.ongoing(s)
		s.lastDenied, s.message = g.now(), message
	})
	return started
}

// Episode returns the message of the resource's ongoing fight episode and
// when it ends if no correction is denied meanwhile; "" when there is none.
func (g *Guard) Episode(key Key) (msg string, ends time.Time) {
	g.states.view(key, func(st *resourceState) {
		if st != nil && st.fight != nil && g.ongoing(st.fight) {
			msg, ends = st.fight.message, st.fight.lastDenied.Add(g.refill())
		}
	})
	return msg, ends
}

func (g *Guard) ongoing(s *fightState) bool {
	return !s.lastDenied.IsZero() && g.now().Sub(s.lastDenied) < g.refill()
}

// refill is how long an empty bucket takes to fill up again.
func (g *Guard) refill() time.Duration {
	return time.Duration(g.burst) * g.interval
}
