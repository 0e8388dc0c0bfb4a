package ha

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrNotLeader stops a write that this replica may no longer make: under
// leader election, its last renewal of the Lease is too old to be sure that
// no other replica holds it now.
var ErrNotLeader = errors.New("not writing: this replica may have lost the leader-election Lease (not renewed in time)")

// FencedLock is the Lease lock with the time each successful write of it
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
type FencedLock struct {
	resourcelock.Interface
	renewDeadline time.Duration
	// sent is when the last successful Create or Update of the Lease by
	// this replica was sent (monotonic clock); nil before the first.
	sent atomic.Pointer[time.Time]
	// onTrip runs once, the first time Allow refuses a write.
	onTrip func()
	// wire is set by that first refusal, and is never cleared: a
	// leadership that went stale once is over, even if a renewal sent
	// before the pause lands after it.
	wire Tripwire
	// now is the clock (tests); nil is time.Now.
	now func() time.Time
}

// NewFencedLock fences lock: Allow refuses every write once the last
// renewal it sent is renewDeadline old.
func NewFencedLock(lock resourcelock.Interface, renewDeadline time.Duration) *FencedLock {
	return &FencedLock{Interface: lock, renewDeadline: renewDeadline}
}

func (l *FencedLock) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// Create acquires a Lease that does not exist yet.
func (l *FencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.clock()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.sent.Store(&start)
	}
	return err
}

// Update acquires, renews or (with no holder) releases the Lease.
func (l *FencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
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

// Allow returns nil while this replica may write: its last acquire or
// renewal was sent less than RenewDeadline ago, a margin of
// LeaseDuration - RenewDeadline before any other replica may hold the Lease
// (the margin covers the latency of the write about to be sent; a write
// already sent cannot be called back). The first refusal of a leader whose
// renewals went stale calls onTrip, which stops the workers at once.
func (l *FencedLock) Allow() error {
	if l.wire.Tripped() {
		return ErrNotLeader
	}
	t := l.sent.Load()
	if t == nil {
		// Not acquired yet, or released: nothing runs that could write.
		return ErrNotLeader
	}
	if l.clock().Sub(*t) < l.renewDeadline {
		return nil
	}
	l.wire.Trip(l.onTrip)
	return ErrNotLeader
}

// release gives the Lease up, so that a standby takes over at once instead
// of after it expires, and returns the holder it read. It writes only when
// that holder, read just now, is this replica, and the write is
// conditional on that read (the lock sends the resourceVersion it read), so
// a replica that acquired the Lease in between makes the write fail with a
// conflict rather than be overwritten. Never after the fence tripped: the
// leadership is over then whatever the Lease says.
func (l *FencedLock) release(ctx context.Context) (holder string, err error) {
	if l.wire.Tripped() {
		return "", ErrNotLeader
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

// Timings are the Leases' durations (see
// leaderelection.LeaderElectionConfig), of leader election and of a ring;
// tests shorten them.
type Timings struct {
	Lease, Renew, Retry time.Duration
}

// DefaultTimings are client-go's recommended values.
var DefaultTimings = Timings{Lease: 15 * time.Second, Renew: 10 * time.Second, Retry: 2 * time.Second}

// Validate says whether the timings can work: a Lease outlives its renew
// deadline, which outlasts a retry with client-go's jitter
// (leaderelection.JitterFactor, 1.2), which is positive. client-go's elector
// refuses other values only once it starts; this names the flags at once.
func (t Timings) Validate() error {
	switch {
	case t.Retry <= 0:
		return fmt.Errorf("the retry period (%s) must be positive", t.Retry)
	case t.Renew <= time.Duration(leaderelection.JitterFactor*float64(t.Retry)):
		return fmt.Errorf("the renew deadline (%s) must be longer than %.1f times the retry period (%s)", t.Renew, leaderelection.JitterFactor, t.Retry)
	case t.Lease <= t.Renew:
		return fmt.Errorf("the lease duration (%s) must be longer than the renew deadline (%s)", t.Lease, t.Renew)
	}
	return nil
}

// Identity is given, or the hostname with a UUID: the suffix keeps
// two processes on one host (or a restarted pod whose old Lease has not
// expired) from taking each other for the holder.
func Identity(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// ErrLeaseLost ends Run when the Lease was lost rather than given up.
var ErrLeaseLost = errors.New("lost the leader-election Lease")

// Lead runs work while lock's Lease is held, and returns when ctx
// is cancelled and work has returned, or when the Lease is lost
// (ErrLeaseLost, unless work failed first). work's context ends on either.
//
// It releases the Lease itself, after work has drained, instead of setting
// client-go's ReleaseOnCancel: the elector's release() reads the Lease to
// learn its resourceVersion but decides whether it is the holder from the
// record it observed before, so a leader paused past its Lease and resumed
// overwrites the new leader's Lease with an empty holder, at the fresh
// resourceVersion that optimistic concurrency cannot refuse, and a third
// replica takes it over while the new leader still writes: two leaders.
// See FencedLock.release for the rule that replaces it.
func Lead(ctx context.Context, lock *FencedLock, name string, t Timings, work func(ctx context.Context) error) error {
	logger := klog.FromContext(ctx)
	var runErr error
	// lost says the leadership ended without this process giving it up.
	var lost atomic.Bool
	// The elector's context is not the process's: on SIGTERM the workers
	// drain first and only then does the elector stop (cancel below), so
	// that no other replica starts writing while this one still does. The
	// elector also runs OnStartedLeading in a goroutine of its own and does
	// not wait for it: done does.
	leCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// Every write first asks the lock whether the Lease is surely still
	// held; the first refusal ends the leadership at once, as a lost Lease
	// does, rather than after the elector's renew deadline.
	lock.onTrip = func() {
		logger.Info("The Lease was not renewed in time: stopping before the next write", "renewDeadline", lock.renewDeadline)
		cancel()
	}
	done := make(chan struct{})
	var started atomic.Bool
	stopStandby := context.AfterFunc(ctx, func() {
		if !started.Load() {
			cancel() // a standby has nothing to drain
		}
	})
	defer stopStandby()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: t.Lease,
		RenewDeadline: t.Renew,
		RetryPeriod:   t.Retry,
		// See above and FencedLock.release: never client-go's release.
		ReleaseOnCancel: false,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				started.Store(true)
				defer close(done)
				// work stops on SIGTERM (ctx) or when the Lease is lost
				// (leaderCtx); only the first drains.
				workCtx, stop := context.WithCancel(leaderCtx)
				defer stop()
				unhook := context.AfterFunc(ctx, stop)
				defer unhook()
				runErr = work(workCtx)
				cancel()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost.Store(true)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(leCtx)
	if !started.Load() {
		return runErr
	}
	<-done
	if lost.Load() {
		if runErr == nil {
			runErr = ErrLeaseLost
		}
		return runErr
	}
	// Given up on SIGTERM after the drain: hand the Lease over now rather
	// than leave the standby waiting for it to expire.
	relCtx, stopRel := context.WithTimeout(context.WithoutCancel(ctx), t.Renew)
	defer stopRel()
	switch holder, err := lock.release(relCtx); {
	case err != nil:
		logger.Info("Did not release the Lease; a standby takes it over once it expires", "err", err)
	case holder == lock.Identity():
		logger.Info("Released the Lease")
	default:
		logger.Info("Not releasing the Lease: this replica no longer holds it", "holder", holder)
	}
	return runErr
}
