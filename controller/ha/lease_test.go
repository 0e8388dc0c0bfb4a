package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a resource lock that accepts every write.
type fakeLock struct {
	resourcelock.Interface
	id string
}

func (f *fakeLock) Identity() string { return f.id }
func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return nil
}
func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return nil
}

func TestFencedLock(t *testing.T) {
	trips := 0
	now := time.Unix(1000, 0)
	l := &FencedLock{Interface: &fakeLock{id: "me"}, renewDeadline: 10 * time.Second,
		onTrip: func() { trips++ }, now: func() time.Time { return now }}
	ctx := context.Background()
	if err := l.Allow(); !errors.Is(err, ErrNotLeader) || trips != 0 {
		t.Fatalf("before acquiring: allow() = %v, %d trips; want ErrNotLeader, no trip", err, trips)
	}
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(); err != nil {
		t.Fatalf("just acquired: allow() = %v", err)
	}
	now = now.Add(10 * time.Second) // past the renew deadline, as a paused leader
	if err := l.Allow(); !errors.Is(err, ErrNotLeader) || trips != 1 {
		t.Fatalf("renewal too old: allow() = %v, %d trips; want ErrNotLeader, 1 trip", err, trips)
	}
	if err := l.Allow(); !errors.Is(err, ErrNotLeader) || trips != 1 {
		t.Fatalf("again: allow() = %v, %d trips; want ErrNotLeader, still 1 trip", err, trips)
	}
	// A renewal sent before the pause and answered after it does not
	// reopen the fence: the leadership that went stale is over.
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(); !errors.Is(err, ErrNotLeader) || trips != 1 {
		t.Fatalf("renewed after the trip: allow() = %v, %d trips; want ErrNotLeader, still 1 trip", err, trips)
	}
	if _, err := l.release(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("release after the trip = %v, want ErrNotLeader and no write", err)
	}

	// A fresh fence: renewals keep it open, a release closes it.
	l = &FencedLock{Interface: &fakeLock{id: "me"}, renewDeadline: 10 * time.Second,
		now: func() time.Time { return now }}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(9 * time.Second)
	if err := l.Allow(); err != nil {
		t.Fatalf("renewed 9s ago: allow() = %v", err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("released: allow() = %v, want ErrNotLeader", err)
	}
}
