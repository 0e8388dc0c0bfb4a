package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errNotLeader stops a write that this replica may no longer make: under
// leader election, its last renewal of the Lease is too old to be sure that
// no other replica holds it now.
var errNotLeader = errors.New("not writing: this replica may have lost the leader-election Lease (not renewed in time)")

// fencedLock is the Lease lock with the time each successful write of it
// (acquire or renew) was sent. client-go's elector reports a lost Lease only
// once its renew loop gives up, RenewDeadline after the first failed
// attempt. A leader paused (SIGSTOP, a long GC pause, a frozen VM) past its
// Lease resumes believing it leads for up to RenewDeadline more, while
// another replica already writes: the fault suite measured 10 s of such
// writes. The elector's own record of its last renewal (Check, observedTime)
// does not help: it is the time the answer was read, and a pause between
// the server's answer and its reading makes a renewal 20 s old look fresh.
// The send time is what bounds when another replica may take over: not
// before LeaseDuration after it saw the renewal, which it cannot have seen
// before it was sent.
type fencedLock struct {
	resourcelock.Interface
	renewDeadline time.Duration
	// sent is when the last successful Create or Update of the Lease by
	// this replica was sent (monotonic clock); nil before the first.
	sent atomic.Pointer[time.Time]
	// onTrip runs once, the first time allow refuses a write.
	onTrip func()
	once   sync.Once
	// tripped is set by that first refusal, and is never cleared: a
	// leadership that went stale once is over, even if a renewal sent
	// before the pause lands after it.
	tripped atomic.Bool
	// now is the clock (tests); nil is time.Now.
	now func() time.Time
}

func (l *fencedLock) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// Create acquires a Lease that does not exist yet.
func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.clock()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.sent.Store(&start)
	}
	return err
}

// Update acquires, renews or (with no holder) releases the Lease.
func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.clock()
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		if ler.HolderIdentity == l.Identity() {
			l.sent.Store(&start)
		} else {
			l.sent.Store(nil) // released
		}
	}
	return err
}

// allow returns nil while this replica may write: its last acquire or
// renewal was sent less than RenewDeadline ago, a margin of
// LeaseDuration - RenewDeadline before any other replica may hold the Lease
// (the margin covers the latency of the write about to be sent; a write
// already sent cannot be called back). The first refusal of a leader whose
// renewals went stale calls onTrip, which stops the workers at once.
func (l *fencedLock) allow() error {
	if l.tripped.Load() {
		return errNotLeader
	}
	t := l.sent.Load()
	if t == nil {
		// Not acquired yet, or released: nothing runs that could write.
		return errNotLeader
	}
	if l.clock().Sub(*t) < l.renewDeadline {
		return nil
	}
	l.tripped.Store(true)
	if l.onTrip != nil {
		l.once.Do(l.onTrip)
	}
	return errNotLeader
}

// release gives the Lease up, so that a standby takes over at once instead
// of after it expires, and returns the holder it read. It writes only when
// that holder, read just now, is this replica, and the write is
// conditional on that read (the lock sends the resourceVersion it read), so
// a replica that acquired the Lease in between makes the write fail with a
// conflict rather than be overwritten. Never after the fence tripped: the
// leadership is over then whatever the Lease says.
func (l *fencedLock) release(ctx context.Context) (holder string, err error) {
	if l.tripped.Load() {
		return "", errNotLeader
	}
	rec, _, err := l.Interface.Get(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the Lease to release it: %w", err)
	}
	if rec.HolderIdentity != l.Identity() {
		return rec.HolderIdentity, nil
	}
	now := metav1.NewTime(l.clock())
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	}); err != nil {
		return rec.HolderIdentity, fmt.Errorf("releasing the Lease: %w", err)
	}
	return rec.HolderIdentity, nil
}

// mayWrite returns nil when this replica may write for namespace ns:
// always without leader election or a ring; under leader election while its
// fencedLock allows; in a ring while ringState.allow does.
func (c *Controller) mayWrite(ns string) error {
	if c.fence == nil {
		return nil
	}
	return c.fence(ns)
}
