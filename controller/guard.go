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
type fightGuard struct {
	burst    int
	interval time.Duration

	mu      sync.Mutex
	buckets map[Key]flowcontrol.RateLimiter
}

func newFightGuard(burst int, interval time.Duration) *fightGuard {
	return &fightGuard{burst: burst, interval: interval, buckets: map[Key]flowcontrol.RateLimiter{}}
}

// allow takes a token for one drift correction of the resource key.
func (g *fightGuard) allow(key Key) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.buckets[key]
	if !ok {
		b = flowcontrol.NewTokenBucketRateLimiter(float32(1/g.interval.Seconds()), g.burst)
		g.buckets[key] = b
	}
	return b.TryAccept()
}

// forget drops the bucket of a deleted resource.
func (g *fightGuard) forget(key Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.buckets, key)
}
