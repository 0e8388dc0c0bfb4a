package ring

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// A handover with no double writes. Every member acts on a view: the
// member list it last read from the ring's Leases. It publishes the view it
// acts on (in its own Lease). A member M writes for a namespace only when
//
//  1. its own Lease is valid: renewed less than the renew deadline ago
//     (the existing write fence), so a member paused past its Lease
//     writes nothing once resumed;
//  2. the namespace is in M's share under its view V; and
//  3. every other live member has published V.
//
// And a member publishes a new view only after it stopped writing under
// the old one (its in-flight writes for the namespaces it loses drained).
//
// Why no two members write for one namespace at once: say M writes under V
// and N under W != V, for the same namespace. M checked that N published V,
// and N publishes W only after it stopped writing under V; N writes under
// W only after it saw M publish W, which M does only after it stopped
// writing under V. Each write under the new view follows the other
// member's last write under the old one. A member that died is not live:
// its Lease expired, and rule 1 fences it if it comes back.

// View is a ring's membership and its division of the namespaces, as one
// member acts on it.
type View struct {
	// Members are the identities of the live members, sorted.
	Members []string
	// assignment is Assign(Members, the namespaces), computed once by
	// NewView: every write asks MayWrite.
	assignment Assignment
	// id names the members and their ranges (see ID).
	id string
}

// NewView returns the view of members dividing namespaces, each in any
// order.
func NewView(members, namespaces []string) View {
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	v := View{Members: ms, assignment: Assign(ms, namespaces)}
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s\n", m)
		for _, r := range v.assignment.Ranges[m] {
			fmt.Fprintf(h, "%x-%x\n", r.Start, r.End)
		}
	}
	v.id = hex.EncodeToString(h.Sum(nil)[:8])
	return v
}

// Share returns member m's ranges under v.
func (v View) Share(m string) []Range { return v.assignment.Ranges[m] }

// Held returns how many namespaces member m holds under v, and how many
// were divided.
func (v View) Held(m string) (held, of int) {
	return v.assignment.Held[m], v.assignment.Namespaces
}

// ID names the view in a member's Lease: the same members holding the same
// ranges, the same ID. A namespace added that lands with the member that
// held its hash already changes no range, and so no view: the members go
// on writing without a handover.
func (v View) ID() string { return v.id }

// MayWrite applies the rule above for member self acting on view, given
// whether its own Lease is valid and the view each other live member has
// published (by identity). It returns false and why when self must not
// write for namespace ns.
func MayWrite(self string, view View, leaseValid bool, published map[string]string, ns string) (bool, string) {
	if !leaseValid {
		return false, "own Lease not renewed in time"
	}
	if !slices.Contains(view.Members, self) {
		return false, "not a member of its own view"
	}
	id := view.ID()
	for _, m := range view.Members {
		if m != self && published[m] != id {
			return false, "member " + m + " has not adopted view " + id
		}
	}
	if !Holds(view.Share(self), ns) {
		return false, "namespace not in this member's share"
	}
	return true, ""
}
