package ha

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseStore is one Lease on a fake API server: a record, its
// resourceVersion, and every write that reached it, in order.
type leaseStore struct {
	mu     sync.Mutex
	rec    *resourcelock.LeaderElectionRecord
	rv     int
	writes []leaseWrite
}

// leaseWrite is one accepted write: who sent it and the holder it wrote.
type leaseWrite struct{ by, holder string }

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// set writes rec as replica by, as another process would.
func (s *leaseStore) set(by string, rec resourcelock.LeaderElectionRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec, s.rv = &rec, s.rv+1
	s.writes = append(s.writes, leaseWrite{by, rec.HolderIdentity})
}

func (s *leaseStore) log() []leaseWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]leaseWrite(nil), s.writes...)
}

// storeLock is one replica's view of a leaseStore, with the API server's
// optimistic concurrency: like resourcelock.LeaseLock, an Update sends the
// resourceVersion of the replica's last read or write, and is refused with
// a conflict if another write came in between.
type storeLock struct {
	store *leaseStore
	id    string
	rv    int
}

func (l *storeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec == nil {
		return nil, nil, apierrors.NewNotFound(leaseGR, "stencil")
	}
	rec := *l.store.rec
	l.rv = l.store.rv
	raw, err := json.Marshal(rec)
	return &rec, raw, err
}

func (l *storeLock) Create(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec != nil {
		return apierrors.NewAlreadyExists(leaseGR, "stencil")
	}
	l.store.rec, l.store.rv = &rec, l.store.rv+1
	l.rv = l.store.rv
	l.store.writes = append(l.store.writes, leaseWrite{l.id, rec.HolderIdentity})
	return nil
}

func (l *storeLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	if l.rv != l.store.rv {
		return apierrors.NewConflict(leaseGR, "stencil", errors.New("the object has been modified"))
	}
	l.store.rec, l.store.rv = &rec, l.store.rv+1
	l.rv = l.store.rv
	l.store.writes = append(l.store.writes, leaseWrite{l.id, rec.HolderIdentity})
	return nil
}

func (l *storeLock) RecordEvent(string) {}
func (l *storeLock) Identity() string   { return l.id }
func (l *storeLock) Describe() string   { return "fake/stencil" }

// TestPausedLeaderDoesNotReleaseNewLeadersLease replays the fault suite's
// leader-pause: leader a is paused past its Lease, b acquires it, a resumes
// and stops (its fence trips, or SIGTERM). No write of a may reach the Lease
// after b's: client-go's ReleaseOnCancel wrote an empty holder over b's
// record, deciding from the record a observed before its pause.
func TestPausedLeaderDoesNotReleaseNewLeadersLease(t *testing.T) {
	for _, how := range []string{"fence trips", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			store := &leaseStore{}
			now := time.Unix(1000, 0)
			var clockMu sync.Mutex
			lock := &FencedLock{
				Interface:     &storeLock{store: store, id: "a"},
				renewDeadline: 2 * time.Minute,
				now: func() time.Time {
					clockMu.Lock()
					defer clockMu.Unlock()
					return now
				},
			}
			// A retry period of a minute: after acquiring and its first
			// renewal, a's elector sleeps, as a paused process does.
			timings := Timings{Lease: 3 * time.Minute, Renew: 2 * time.Minute, Retry: time.Minute}
			ctx, sigterm := context.WithCancel(context.Background())
			defer sigterm()
			leading := make(chan struct{})
			result := make(chan error, 1)
			go func() {
				result <- Lead(ctx, lock, "stencil", timings, func(workCtx context.Context) error {
					close(leading)
					<-workCtx.Done()
					return nil
				})
			}()
			<-leading
			deadline := time.Now().Add(10 * time.Second)
			for len(store.log()) < 2 { // the acquire and the first renewal
				if time.Now().After(deadline) {
					t.Fatalf("a did not acquire and renew the Lease: writes %v", store.log())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := lock.Allow(); err != nil {
				t.Fatalf("a just renewed: allow() = %v", err)
			}

			// a is paused past its Lease; b acquires it.
			clockMu.Lock()
			now = now.Add(4 * time.Minute)
			clockMu.Unlock()
			store.set("b", resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 180, LeaderTransitions: 1})
			before := len(store.log())

			// a resumes and stops.
			switch how {
			case "fence trips":
				if err := lock.Allow(); !errors.Is(err, ErrNotLeader) {
					t.Fatalf("a resumed: allow() = %v, want ErrNotLeader", err)
				}
			case "SIGTERM":
				sigterm()
			}
			select {
			case err := <-result:
				if how == "fence trips" && !errors.Is(err, ErrLeaseLost) {
					t.Errorf("Lead = %v, want ErrLeaseLost", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Lead did not return after a stopped")
			}
			writes := store.log()
			for _, w := range writes[before:] {
				if w.by == "a" {
					t.Errorf("a wrote the Lease after b acquired it (holder %q): all writes %v", w.holder, writes)
				}
			}
			if h := writes[len(writes)-1].holder; h != "b" {
				t.Errorf("holder after a stopped = %q, want b", h)
			}
		})
	}
}

// TestLeaderReleasesOnSIGTERM: a leader that still holds its Lease gives it
// up after draining, with a write conditional on the read that found it
// the holder.
func TestLeaderReleasesOnSIGTERM(t *testing.T) {
	store := &leaseStore{}
	lock := &FencedLock{Interface: &storeLock{store: store, id: "a"}, renewDeadline: 2 * time.Minute}
	timings := Timings{Lease: 3 * time.Minute, Renew: 2 * time.Minute, Retry: time.Minute}
	ctx, sigterm := context.WithCancel(context.Background())
	drained := false
	result := make(chan error, 1)
	go func() {
		result <- Lead(ctx, lock, "stencil", timings, func(workCtx context.Context) error {
			sigterm()
			<-workCtx.Done()
			drained = true
			return nil
		})
	}()
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("Lead = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lead did not return after SIGTERM")
	}
	writes := store.log()
	if !drained || len(writes) == 0 || writes[len(writes)-1] != (leaseWrite{"a", ""}) {
		t.Fatalf("drained %t, writes %v; want the last write a release by a", drained, writes)
	}
	if err := lock.Allow(); !errors.Is(err, ErrNotLeader) {
		t.Errorf("after the release: allow() = %v, want ErrNotLeader", err)
	}
}
