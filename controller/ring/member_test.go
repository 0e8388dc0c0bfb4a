package ring

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	fakecoordination "k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeLeases is a Leases client over an object tracker.
func fakeLeases() *fakecoordination.FakeCoordinationV1 {
	tracker := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	f := &k8stesting.Fake{}
	f.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	return &fakecoordination.FakeCoordinationV1{Fake: f}
}

// joined returns member id of ring r in namespace ops, on clock, with a
// 15 s Lease and a 10 s renew deadline, once it has joined publishing v0.
func joined(t *testing.T, leases *fakecoordination.FakeCoordinationV1, clock func() time.Time, id string) *Member {
	t.Helper()
	m := &Member{Leases: leases, Namespace: "ops", Ring: "r", Identity: id,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, Now: clock}
	if err := m.Join(context.Background(), "v0"); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMemberLiveness: a member is live while its Lease is seen to change
// within LeaseDuration of this member's clock, gone at once when it leaves,
// and its own Lease is valid only within RenewDeadline of its last renewal;
// once lapsed, it is not renewed.
func TestMemberLiveness(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	leases := fakeLeases()
	member := func(id string) *Member {
		return &Member{Leases: leases, Namespace: "ops", Ring: "r", Identity: id,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, Now: clock}
	}
	a, b := member("a"), member("b")
	for _, m := range []*Member{a, b} {
		if err := m.Join(ctx, "v0"); err != nil {
			t.Fatal(err)
		}
	}
	live := func(m *Member) []string {
		t.Helper()
		snap, err := m.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Live
	}
	if got := live(a); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after both joined, a sees %v", got)
	}
	// b renews, a renews: both live 12 s on.
	now = now.Add(6 * time.Second)
	if err := b.Renew(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(snap.Live, []string{"a", "b"}) || snap.Published["b"] != "v1" {
		t.Fatalf("after renewals, a sees %+v", snap)
	}
	// b stops renewing (paused); a keeps renewing.
	for range 8 {
		now = now.Add(2 * time.Second)
		if err := a.Renew(ctx, "v1"); err != nil {
			t.Fatal(err)
		}
		live(a)
	}
	if got := live(a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("16 s after b's last renewal, a sees %v, want b expired after 15 s of its own clock", got)
	}
	if b.Valid() {
		t.Fatal("b's own Lease valid 16 s after its last renewal, want invalid after RenewDeadline (10 s)")
	}
	if !a.Valid() {
		t.Fatal("a's own Lease invalid 2 s after its renewal")
	}
	// b resumes: it may not renew its lapsed Lease, and stays out.
	if err := b.Renew(ctx, "v2"); !errors.Is(err, ErrLapsed) {
		t.Fatalf("b renewed its lapsed Lease: %v", err)
	}
	if got := live(a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after b tried to renew, a sees %v", got)
	}
	// c joins and leaves: gone at the next read, without waiting for expiry.
	c := member("c")
	if err := c.Join(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if got := live(a); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after c joined, a sees %v", got)
	}
	if err := c.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := live(a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after c left, a sees %v", got)
	}
	if c.Valid() {
		t.Fatal("c still valid after it left")
	}
}

// TestSweepDeletesTheLeasesOfDeadMembers: a member killed with -9 leaves
// its Lease; once a live member has seen it unchanged for twice
// LeaseDuration, Sweep deletes it, and a member that starts then counts
// only the live ones in its first view, instead of the dead one for its
// first LeaseDuration (no view would settle meanwhile).
func TestSweepDeletesTheLeasesOfDeadMembers(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	leases := fakeLeases()
	member := func(id string) *Member { return joined(t, leases, clock, id) }
	a := member("a")
	member("dead")
	for i := range 16 {
		now = now.Add(2 * time.Second)
		if err := a.Renew(ctx, "v0"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := leases.Leases("ops").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := 2 * time.Duration(i+1) * time.Second; elapsed < 30*time.Second && len(list.Items) != 2 {
			t.Fatalf("%s after the dead member's last renewal: %d Leases, want it kept until 30 s", elapsed, len(list.Items))
		}
	}
	c := member("c")
	snap, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(snap.Live, []string{"a", "c"}) {
		t.Fatalf("a newcomer's first view: %v, want [a c] (the dead member's Lease swept)", snap.Live)
	}
}

// TestALapsedMemberWritesNoLease: a member whose own Lease lapsed (paused
// past its renew deadline) neither renews its Lease nor sweeps others',
// whatever its last list of the ring said: resumed in the middle of a
// loop turn, it would otherwise come back to life while the others hold
// its share, or delete their Leases as if they were the ones gone.
func TestALapsedMemberWritesNoLease(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	leases := fakeLeases()
	var writes int
	leases.Fake.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "list" && a.GetVerb() != "get" {
			writes++
		}
		return false, nil, nil
	})
	member := func(id string) *Member { return joined(t, leases, clock, id) }
	paused, other := member("paused"), member("other")
	if _, err := paused.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	// 40 s pass; the other member renews meanwhile, but the paused one's
	// list is from before (as when the list's response arrived just
	// before SIGSTOP): it judges the other's Lease stale.
	now = now.Add(40 * time.Second)
	paused.mu.Lock()
	paused.stale = map[string]string{other.LeaseName(): "1"}
	paused.mu.Unlock()
	before := writes
	if err := paused.Renew(ctx, "v1"); !errors.Is(err, ErrLapsed) {
		t.Fatalf("a lapsed member's Renew: %v, want ErrLapsed", err)
	}
	if err := paused.Sweep(ctx); !errors.Is(err, ErrLapsed) {
		t.Fatalf("a lapsed member's Sweep: %v, want ErrLapsed", err)
	}
	if writes != before {
		t.Fatalf("a lapsed member sent %d writes of the Leases, want 0", writes-before)
	}
	if paused.Valid() {
		t.Fatal("the lapsed member counts itself valid")
	}
}
