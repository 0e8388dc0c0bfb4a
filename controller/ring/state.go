package ring

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"stencil.dev/stencil/controller/ha"
	"stencil.dev/stencil/controller/registry"
)

// A ring member's view of its ring: the view it acts on, its share, and
// the fence every write passes. A view change waits for the syncs in
// flight (each runs between BeginSync and its end) before it takes effect,
// and only then is the new view published: that is the "stopped writing
// under the old view" of the handover rule (handover.go), without which two
// members could write for one namespace.

// ErrNotHolder stops a write for a namespace this ring member does not
// hold now, or holds under a view some member has not adopted yet. The key
// is dropped: the namespace's holder syncs it, and this member syncs every
// resource again once its view is adopted.
var ErrNotHolder = errors.New("not writing: namespace not held by this ring member under a view every member adopted")

// ErrLeaseNotRenewed stops every write of a member whose own Lease was not
// renewed in time: the others may have taken its share.
var ErrLeaseNotRenewed = errors.New("not writing: this ring member's Lease was not renewed in time")

// State is a member's view of its ring.
type State struct {
	member *Member
	self   string

	// syncs is held for reading by every sync; a view change takes it for
	// writing, and so waits for the syncs in flight.
	syncs sync.RWMutex

	mu        sync.Mutex
	view      View
	share     []Range
	published map[string]string
	// namespaces are the namespaces the view divides, sorted: a tick
	// whose members and namespaces are the same computes nothing.
	namespaces []string
	// watched is the share the informers were last built for (nil before
	// the first Reshard). It can differ from share: a view adopted while
	// the informers still watch the last one (a reshard under way, or one
	// that failed). The fence allows no write until they match: a sync
	// decides from the caches, and caches of another share either miss
	// the namespace or hold what another member writes.
	watched    []Range
	hasWatched bool
	// settled: every live member published view; changed is when view
	// became this member's.
	settled bool
	changed time.Time

	// wire trips when the member's own Lease was not renewed in time;
	// onTrip then stops the workers.
	wire   ha.Tripwire
	onTrip func()
}

// NewState is member m's view of its ring, m being this replica
// (self); onTrip runs once, when the member's Lease lapses.
func NewState(m *Member, self string, onTrip func()) *State {
	return &State{member: m, self: self, onTrip: onTrip}
}

// Member is this replica's membership.
func (r *State) Member() *Member { return r.member }

// BeginSync is called before every sync; the function it returns, after.
// A view change waits for the syncs in flight (Adopt).
func (r *State) BeginSync() (end func()) {
	r.syncs.RLock()
	return r.syncs.RUnlock
}

// Tripped reports whether the member's Lease lapsed: it writes no more.
func (r *State) Tripped() bool { return r.wire.Tripped() }

// View returns the number of members of the view this member acts on,
// how many namespaces this member holds under it, and how many it divides.
func (r *State) View() (members, held, of int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, of = r.view.Held(r.self)
	return len(r.view.Members), held, of
}

// Settled reports whether every live member published the view this
// member acts on: until then, it writes nothing.
func (r *State) Settled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settled
}

// Allow is the ring's write fence: nil while this member may write for
// namespace ns.
func (r *State) Allow(ns string) error {
	if r.wire.Tripped() {
		return ErrLeaseNotRenewed
	}
	if !r.member.Valid() {
		r.Trip()
		return ErrLeaseNotRenewed
	}
	r.mu.Lock()
	view, published := r.view, r.published
	r.mu.Unlock()
	if ok, why := MayWrite(r.self, view, true, published, ns); !ok {
		return fmt.Errorf("%w: %s", ErrNotHolder, why)
	}
	if r.NeedsReshard() {
		return fmt.Errorf("%w: this member's informers do not watch the adopted view's share yet", ErrNotHolder)
	}
	return nil
}

// NeedsReshard reports whether the informers watch another share than the
// adopted view's.
func (r *State) NeedsReshard() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.hasWatched || !slices.Equal(r.share, r.watched)
}

// Resharded records that the informers now watch share.
func (r *State) Resharded(share []Range) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watched, r.hasWatched = share, true
}

// Trip ends the membership: no write after it, and the workers stop.
func (r *State) Trip() { r.wire.Trip(r.onTrip) }

// Holds reports whether ns is in this member's current share.
func (r *State) Holds(ns string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Holds(r.share, ns)
}

// ViewID is the ID of the view this member acts on.
func (r *State) ViewID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view.ID()
}

// Adopt records snap and the namespaces that exist (sorted); when the
// live members or their division of the namespaces differ from the view's,
// it waits for the syncs in flight and switches to the new view. It
// reports whether the view changed, and whether this member's share did.
func (r *State) Adopt(snap Snapshot, namespaces []string, now time.Time) (viewChanged, shareChanged bool) {
	r.mu.Lock()
	r.published = snap.Published
	same := r.view.Members != nil && slices.Equal(snap.Live, r.view.Members) && slices.Equal(namespaces, r.namespaces)
	current := r.view.ID()
	r.mu.Unlock()
	if same {
		return false, false
	}
	next := NewView(snap.Live, namespaces)
	if next.ID() == current {
		// A namespace came or went and landed with the member that held
		// its hash: the same ranges, no handover.
		r.mu.Lock()
		r.view, r.namespaces = next, namespaces
		r.mu.Unlock()
		return false, false
	}
	r.syncs.Lock()
	defer r.syncs.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	share := next.Share(r.self)
	shareChanged = !slices.Equal(share, r.share)
	r.view, r.namespaces, r.share, r.settled, r.changed = next, namespaces, share, false, now
	return true, shareChanged
}

// Settle reports, once per view, that every live member published it:
// from then on this member writes for its share. It returns how long the
// handover took.
func (r *State) Settle(now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled || r.view.Members == nil {
		return 0, false
	}
	id := r.view.ID()
	for _, m := range r.view.Members {
		if m != r.self && r.published[m] != id {
			return 0, false
		}
	}
	r.settled = true
	return now.Sub(r.changed), true
}

// Shard is the registry's share for this member's current ranges, and
// those ranges.
func (r *State) Shard(serverFilters bool) (*registry.Shard, []Range) {
	share := r.ShareNow()
	s := &registry.Shard{Holds: func(ns string) bool { return Holds(share, ns) }}
	if serverFilters {
		s.Selector = Selector(share)
	}
	return s, share
}

// ShareNow returns the member's current ranges.
func (r *State) ShareNow() []Range {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.share)
}
