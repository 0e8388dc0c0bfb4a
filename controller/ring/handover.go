package ring

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
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

// View is a ring's membership as one member acts on it.
type View struct {
	// Members are the identities of the live members, sorted.
	Members []string
	// shares is Assign(Members), computed once by NewView: every write
	// asks MayWrite.
	shares map[string][]Range
}

// NewView returns the view of members, in any order.
func NewView(members []string) View {
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	return View{Members: ms, shares: Assign(ms)}
}

// Share returns member m's ranges under v.
func (v View) Share(m string) []Range {
	if v.shares == nil {
		return Assign(v.Members)[m]
	}
	return v.shares[m]
}

// ID names the view in a member's Lease: the same members, the same ID.
func (v View) ID() string {
	sum := sha256.Sum256([]byte(strings.Join(v.Members, "\n")))
	return hex.EncodeToString(sum[:8])
}

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
