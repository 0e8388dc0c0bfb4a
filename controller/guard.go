package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// fightGuard limits drift corrections per custom resource. When another
// actor keeps reverting a field stencil sets, each revert would otherwise
// cost one apply, forever; a token bucket turns that loop into a trickle and
// the resource's status says so.
//
// An episode starts with the first denied correction and lasts until no
// correction has been denied for as long as the bucket takes to refill: the
// Throttled condition stands, and one Warning event is recorded, per episode,
// not per denial or per correction that got through.
type fightGuard struct {
	burst    int
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	state map[Key]*fightState
}

type fightState struct {
	bucket     flowcontrol.RateLimiter
	lastDenied time.Time
	message    string
}

func newFightGuard(burst int, interval time.Duration) *fightGuard {
	return &fightGuard{burst: burst, interval: interval, now: time.Now, state: map[Key]*fightState{}}
}

func (g *fightGuard) get(key Key) *fightState {
	s, ok := g.state[key]
	if !ok {
		s = &fightState{bucket: flowcontrol.NewTokenBucketRateLimiter(float32(1/g.interval.Seconds()), g.burst)}
		g.state[key] = s
	}
	return s
}

// allow takes a token for one drift correction of the resource key.
func (g *fightGuard) allow(key Key) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.get(key).bucket.TryAccept()
}

// deny records a correction held back, with the message that explains it,
// and reports whether this denial starts an episode.
func (g *fightGuard) deny(key Key, message string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.get(key)
	started := !g.ongoing(s)
	s.lastDenied, s.message = g.now(), message
	return started
}

// episode returns the message of the resource's ongoing fight episode and
// when it ends if no correction is denied meanwhile; "" when there is none.
func (g *fightGuard) episode(key Key) (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.state[key]
	if !ok || !g.ongoing(s) {
		return "", time.Time{}
	}
	return s.message, s.lastDenied.Add(g.refill())
}

func (g *fightGuard) ongoing(s *fightState) bool {
	return !s.lastDenied.IsZero() && g.now().Sub(s.lastDenied) < g.refill()
}

// refill is how long an empty bucket takes to fill up again.
func (g *fightGuard) refill() time.Duration {
	return time.Duration(g.burst) * g.interval
}

// forget drops the state of a deleted resource.
func (g *fightGuard) forget(key Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.state, key)
}

// retain drops the state of every resource keep rejects.
func (g *fightGuard) retain(keep func(Key) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	retainKeys(g.state, keep)
}
