package ring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// teams are the namespaces the tests' rings divide, named as clusters
// name them (sorted, as the namespace informer's list is).
var teams = func() []string {
	var out []string
	for i := range 20 {
		out = append(out, fmt.Sprintf("team-%02d", i+1))
	}
	return out
}()

// TestRingHandoverWaitsForSyncsAndAdoption: a member alone writes for
// every namespace; when a second joins, the first switches views only once
// its sync in flight is done, and then writes for no namespace until the
// newcomer published the new view; after that, only for its own share.
// A member whose Lease lapsed writes nothing and stops its workers.
func TestRingHandoverWaitsForSyncsAndAdoption(t *testing.T) {
	ctx := context.Background()
	leases := fakeLeases()
	member := func(id string) *Member { return joined(t, leases, nil, id) }
	observe := func(rs *State) (bool, bool) {
		snap, err := rs.member.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rs.Adopt(snap, teams, time.Now())
	}
	both := NewView([]string{"a", "b"}, teams)
	var nsA, nsB string
	for _, ns := range teams {
		if Holds(both.Share("a"), ns) {
			nsA = ns
		} else {
			nsB = ns
		}
	}

	a := &State{member: member("a"), self: "a"}
	observe(a)
	a.Resharded(a.ShareNow())
	if _, ok := a.Settle(time.Now()); !ok {
		t.Fatal("a member alone did not settle on its own view")
	}
	for _, ns := range []string{nsA, nsB} {
		if err := a.Allow(ns); err != nil {
			t.Fatalf("a alone may not write for %s: %v", ns, err)
		}
	}

	b := &State{member: member("b"), self: "b"}
	a.syncs.RLock() // a sync in flight
	switched := make(chan [2]bool)
	go func() {
		changed, shareChanged := observe(a)
		switched <- [2]bool{changed, shareChanged}
	}()
	select {
	case <-switched:
		t.Fatal("a switched views while one of its syncs was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	a.syncs.RUnlock()
	if got := <-switched; got != [2]bool{true, true} {
		t.Fatalf("b's join: view changed, share changed = %v, want both", got)
	}
	for _, ns := range []string{nsA, nsB} {
		if err := a.Allow(ns); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("before b published the new view, a's write for %s: %v, want ErrNotHolder", ns, err)
		}
	}
	if _, ok := a.Settle(time.Now()); ok {
		t.Fatal("a settled before b published the view")
	}

	observe(b)
	if err := b.member.Renew(ctx, b.ViewID()); err != nil {
		t.Fatal(err)
	}
	observe(a)
	if _, ok := a.Settle(time.Now()); !ok {
		t.Fatal("a did not settle once b published the view")
	}
	a.Resharded(a.ShareNow()) // its informers now watch the new share
	if err := a.Allow(nsA); err != nil {
		t.Fatalf("a may not write for its own %s: %v", nsA, err)
	}
	if err := a.Allow(nsB); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("a's write for b's %s: %v, want ErrNotHolder", nsB, err)
	}

	tripped := false
	a.onTrip = func() { tripped = true }
	a.member.Leave(ctx) // its Lease no longer valid
	if err := a.Allow(nsA); !errors.Is(err, ErrLeaseNotRenewed) || !tripped {
		t.Fatalf("after a's Lease lapsed: %v, tripped %v; want ErrLeaseNotRenewed and the workers stopped", err, tripped)
	}
}

// TestRingMemberWritesOnlyOnceItsCachesWatchTheAdoptedShare: members
// started together (a Deployment's pods) see each other only after their
// first list. A member whose informers were built for the ring it saw
// first (itself alone) adopts the view of three and settles on it; it
// writes nothing, in its share or out of it, until its informers watch the
// new share, and then only for its share.
func TestRingMemberWritesOnlyOnceItsCachesWatchTheAdoptedShare(t *testing.T) {
	ctx := context.Background()
	leases := fakeLeases()
	join := func(id string) *State { return &State{member: joined(t, leases, nil, id), self: id} }
	observe := func(rs *State) {
		snap, err := rs.member.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rs.Adopt(snap, teams, time.Now())
		if err := rs.member.Renew(ctx, rs.ViewID()); err != nil {
			t.Fatal(err)
		}
	}
	three := NewView([]string{"a", "b", "c"}, teams)
	var mine, theirs string
	for _, ns := range teams {
		if Holds(three.Share("a"), ns) {
			mine = ns
		} else {
			theirs = ns
		}
	}

	a := join("a")
	observe(a) // its first list: alone
	a.Resharded(a.ShareNow())
	if a.NeedsReshard() {
		t.Fatal("a's informers watch the share of the view it adopted, yet it asks for a reshard")
	}
	b, c := join("b"), join("c")
	observe(b)
	observe(c)
	observe(a)
	observe(b)
	observe(c)
	if _, ok := a.Settle(time.Now()); !ok {
		t.Fatal("a did not settle on the view of three once b and c published it")
	}
	if !a.NeedsReshard() {
		t.Fatal("a adopted the view of three with informers built for itself alone, and asks for no reshard")
	}
	for _, ns := range []string{mine, theirs} {
		if err := a.Allow(ns); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("before its reshard, a's write for %s: %v, want ErrNotHolder", ns, err)
		}
	}
	a.Resharded(a.ShareNow())
	if err := a.Allow(mine); err != nil {
		t.Fatalf("after its reshard, a may not write for its own %s: %v", mine, err)
	}
	if err := a.Allow(theirs); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("after its reshard, a's write for %s outside its share: %v, want ErrNotHolder", theirs, err)
	}
}

// TestRingViewFollowsTheNamespaces: the view is the members and their
// ranges. A namespace created that lands with the member already holding
// its hash changes no range: no new view, no handover, writes go on. One
// that lands elsewhere is a new view, which nobody writes under until
// every member published it.
func TestRingViewFollowsTheNamespaces(t *testing.T) {
	ctx := context.Background()
	// 19 namespaces between two members: 10 and 9, and a 20th leaves the
	// equal share at 10, so it can land where its hash was held already.
	base := teams[:19]
	before := NewView([]string{"a", "b"}, base)
	var same, moves string
	for i := 0; (same == "" || moves == "") && i < 100000; i++ {
		ns := fmt.Sprintf("new-%d", i)
		with := append(slices.Clone(base), ns)
		slices.Sort(with)
		if NewView([]string{"a", "b"}, with).ID() == before.ID() {
			same = cmp.Or(same, ns)
		} else {
			moves = cmp.Or(moves, ns)
		}
	}
	if same == "" || moves == "" {
		t.Fatalf("no namespace name found that keeps the view (%q) or moves it (%q)", same, moves)
	}

	leases := fakeLeases()
	// A clock that stands still: the Leases never lapse, however slow
	// the race detector makes the test.
	now := time.Now()
	clock := func() time.Time { return now }
	var states []*State
	for _, id := range []string{"a", "b"} {
		states = append(states, &State{member: joined(t, leases, clock, id), self: id})
	}
	adopt := func(rs *State, namespaces []string) bool {
		t.Helper()
		snap, err := rs.member.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		changed, _ := rs.Adopt(snap, namespaces, now)
		if err := rs.member.Renew(ctx, rs.ViewID()); err != nil {
			t.Fatal(err)
		}
		return changed
	}
	for range 2 {
		for _, rs := range states {
			adopt(rs, base)
		}
	}
	a := states[0]
	a.Resharded(a.ShareNow())
	if _, ok := a.Settle(now); !ok {
		t.Fatal("a did not settle on the view both published")
	}
	withSame := append(slices.Clone(base), same)
	slices.Sort(withSame)
	if adopt(a, withSame) {
		t.Fatalf("namespace %s lands with the member holding its hash, yet the view changed", same)
	}
	if _, _, of := a.View(); of != len(base)+1 {
		t.Fatalf("after %s was created a's view divides %d namespaces, want %d", same, of, len(base)+1)
	}
	if a.Holds(same) {
		if err := a.Allow(same); err != nil {
			t.Fatalf("a holds %s and may not write for it: %v", same, err)
		}
	}
	withMoves := append(slices.Clone(withSame), moves)
	slices.Sort(withMoves)
	if !adopt(a, withMoves) {
		t.Fatalf("namespace %s moves ranges between members, yet the view did not change", moves)
	}
	for _, ns := range base {
		if err := a.Allow(ns); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("a wrote for %s under a view b has not published: %v", ns, err)
		}
	}
}
