package ring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Membership: each member holds a Lease of its own, named after the ring
// and its identity and labelled with the ring's name, renewed every
// RetryPeriod; the ring's members are the Leases with that label that are
// live. Liveness is judged as client-go's leader election judges it: by
// the local time at which a Lease was last seen to change, never by the
// renewTime another member's clock wrote, so clock skew between members
// does not matter. A Lease not seen to change for LeaseDuration is
// expired; a deleted one left the ring at once (a member deletes its own
// Lease only after it stopped writing). A Lease not seen to change for
// twice LeaseDuration is deleted by whichever member sees it (Sweep): a
// member killed with -9 leaves its Lease behind, and a member that starts
// later cannot tell it from a live one for LeaseDuration (it has not yet
// seen it not change), so its first view would count the dead member and
// no view would settle until then.

// LabelRing labels a member's Lease with its ring's name.
const LabelRing = "stencil.dev/ring"

// AnnotationView carries, in a member's Lease, the ID of the view it acts
// on (see MayWrite).
const AnnotationView = "stencil.dev/ring-view"

// Member is this process's membership of a ring.
type Member struct {
	// Leases reads and writes the Leases in Namespace.
	Leases    coordinationclient.LeasesGetter
	Namespace string
	// Ring names the ring; Identity this member (unique per process).
	Ring, Identity string
	// LeaseDuration is how long a Lease not seen to change stays live;
	// RenewDeadline how long after its last renewal was sent this member
	// still counts its own Lease valid (less than LeaseDuration: the
	// margin covers a write in flight).
	LeaseDuration, RenewDeadline time.Duration
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time

	// sent is when the last successful write of the own Lease was sent.
	sent atomic.Pointer[time.Time]

	mu sync.Mutex
	// lease is the own Lease as last written.
	lease *coordinationv1.Lease
	// seen holds each Lease's last observed version, by Lease name.
	seen map[string]observation
	// stale are the Leases Observe saw unchanged for twice LeaseDuration,
	// by name, with the resourceVersion seen.
	stale map[string]string
}

// observation is what a member last saw of another's Lease.
type observation struct {
	identity, version, view string
	// at is the local time the version was first seen.
	at time.Time
}

// Snapshot is the ring as a member last read it.
type Snapshot struct {
	// Live are the identities of the live members, this one included while
	// its own Lease is valid.
	Live []string
	// Published maps each live member to the view ID its Lease carries.
	Published map[string]string
}

func (m *Member) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// LeaseName is the name of this member's Lease: the ring's name and a hash
// of the identity, which may hold characters a name may not.
func (m *Member) LeaseName() string {
	sum := sha256.Sum256([]byte(m.Identity))
	return m.Ring + "-" + hex.EncodeToString(sum[:5])
}

// Valid reports whether this member may still write: its last renewal was
// sent less than RenewDeadline ago. A member paused past its Lease finds it
// invalid the moment it resumes, before any write.
func (m *Member) Valid() bool {
	t := m.sent.Load()
	return t != nil && m.now().Sub(*t) < m.RenewDeadline
}

// Join creates this member's Lease, publishing view.
func (m *Member) Join(ctx context.Context, view string) error {
	now := m.now()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.LeaseName(), Namespace: m.Namespace,
			Labels:      map[string]string{LabelRing: m.Ring},
			Annotations: map[string]string{AnnotationView: view},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &m.Identity,
			LeaseDurationSeconds: ptr(int32(m.LeaseDuration / time.Second)),
			AcquireTime:          &metav1.MicroTime{Time: now},
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
	created, err := m.Leases.Leases(m.Namespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating ring Lease %s/%s: %w", m.Namespace, l.Name, err)
	}
	m.mu.Lock()
	m.lease = created
	m.mu.Unlock()
	m.sent.Store(&now)
	return nil
}

// ErrLapsed refuses a write of the ring's Leases by a member whose own
// Lease is no longer valid (Valid).
var ErrLapsed = errors.New("this member's ring Lease lapsed")

// Renew renews this member's Lease, publishing view, while the Lease is
// valid (ErrLapsed after). The write is conditional on the version last
// written: nobody else writes the Lease, so a conflict means it was
// deleted and recreated, and this member is out.
func (m *Member) Renew(ctx context.Context, view string) error {
	m.mu.Lock()
	if m.lease == nil {
		m.mu.Unlock()
		return errors.New("ring Lease not created")
	}
	l := m.lease.DeepCopy()
	m.mu.Unlock()
	// A member whose own Lease lapsed never renews it: paused past it and
	// resumed in the middle of a loop turn, it would otherwise come back
	// to life while the others hold its share.
	if !m.Valid() {
		return ErrLapsed
	}
	now := m.now()
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationView] = view
	updated, err := m.Leases.Leases(m.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renewing ring Lease %s/%s: %w", m.Namespace, l.Name, err)
	}
	m.mu.Lock()
	m.lease = updated
	m.mu.Unlock()
	m.sent.Store(&now)
	return nil
}

// Leave deletes this member's Lease, conditional on the version last
// written, so that the others take its share at once. Call it only once
// this member writes no more.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return nil
	}
	m.sent.Store(nil)
	err := m.Leases.Leases(m.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ring Lease %s/%s: %w", m.Namespace, l.Name, err)
	}
	return nil
}

// Observe lists the ring's Leases and returns the live members and the
// views they publish.
func (m *Member) Observe(ctx context.Context) (Snapshot, error) {
	list, err := m.Leases.Leases(m.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRing + "=" + m.Ring})
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing the Leases of ring %s: %w", m.Ring, err)
	}
	now := m.now()
	own := m.LeaseName()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[string]observation, len(list.Items))
	stale := map[string]string{}
	snap := Snapshot{Published: map[string]string{}}
	for _, l := range list.Items {
		if l.Name == own || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		// A renewal changes the resourceVersion and the renewTime; either
		// says the member is alive (the renewTime as a value only, never
		// compared with this member's clock).
		version := l.ResourceVersion
		if l.Spec.RenewTime != nil {
			version += "/" + l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
		}
		o := observation{identity: *l.Spec.HolderIdentity, version: version, view: l.Annotations[AnnotationView], at: now}
		if prev, ok := m.seen[l.Name]; ok && prev.version == o.version {
			o.at = prev.at
		}
		seen[l.Name] = o
		if now.Sub(o.at) >= 2*m.LeaseDuration {
			stale[l.Name] = l.ResourceVersion
		}
		if now.Sub(o.at) < m.LeaseDuration {
			snap.Live = append(snap.Live, o.identity)
			snap.Published[o.identity] = o.view
		}
	}
	m.seen, m.stale = seen, stale
	if t := m.sent.Load(); t != nil && now.Sub(*t) < m.RenewDeadline {
		snap.Live = append(snap.Live, m.Identity)
	}
	slices.Sort(snap.Live)
	return snap, nil
}

// Sweep deletes the Leases the last Observe saw unchanged for twice
// LeaseDuration: their members are gone (see the note on membership). Each
// delete is conditional on the version seen, so a member that renewed in
// the meantime keeps its Lease; such a conflict, or a Lease already gone,
// is no error.
func (m *Member) Sweep(ctx context.Context) error {
	m.mu.Lock()
	stale := m.stale
	m.stale = nil
	m.mu.Unlock()
	var errs []error
	for name, rv := range stale {
		// Judged from a list read before a pause, every Lease looks
		// stale; only a valid member sweeps (the version precondition
		// would refuse the delete too).
		if !m.Valid() {
			return ErrLapsed
		}
		err := m.Leases.Leases(m.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting the expired ring Lease %s/%s: %w", m.Namespace, name, err))
		}
	}
	return errors.Join(errs...)
}

func ptr[T any](v T) *T { return &v }
