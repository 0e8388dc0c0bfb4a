package ring

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/sharding"
)

func identities(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("stencil-7d9f%02d-%c%c%c", i, 'a'+i%26, 'k'+i%13, 'q'+i%7))
	}
	return out
}

// owner returns the member holding hash h, checking that exactly one does.
func owner(t *testing.T, a map[string][]Range, h uint64) string {
	t.Helper()
	var found []string
	for m, rs := range a {
		for _, r := range rs {
			if r.Contains(h) {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("hash %#x held by %v, want exactly one member", h, found)
	}
	return found[0]
}

// TestAssignTilesTheSpace: for 1 to 10 members the ranges are sorted,
// disjoint, and cover [0, 2^64) exactly.
func TestAssignTilesTheSpace(t *testing.T) {
	for n := 1; n <= 10; n++ {
		a := Assign(identities(n))
		var all []Range
		total := 0.0
		for _, rs := range a {
			all = append(all, rs...)
			total += Share(rs)
		}
		slices.SortFunc(all, func(x, y Range) int {
			if x.Start < y.Start {
				return -1
			}
			return 1
		})
		next := uint64(0)
		for i, r := range all {
			if r.Start != next {
				t.Fatalf("%d members: range %d starts at %#x, want %#x (gap or overlap)", n, i, r.Start, next)
			}
			if r.End == 0 && i != len(all)-1 {
				t.Fatalf("%d members: range %d reaches the end of the space but is not last", n, i)
			}
			next = r.End
		}
		if next != 0 || math.Abs(total-1) > 1e-9 {
			t.Fatalf("%d members: the ranges end at %#x and cover %.6f of the space, want 2^64 and 1", n, next, total)
		}
		for _, h := range []uint64{0, 1, math.MaxUint64, 1 << 63, Hash("default")} {
			owner(t, a, h)
		}
	}
}

// TestAssignMovesLittleWhenAMemberJoinsOrLeaves: among 3 to 10 members, a
// member joining or leaving moves at most 2/N of the space (about 1/N
// expected), measured over 20,000 namespace names.
func TestAssignMovesLittleWhenAMemberJoinsOrLeaves(t *testing.T) {
	var names []string
	for i := range 20000 {
		names = append(names, fmt.Sprintf("team-%d", i))
	}
	moved := func(before, after map[string][]Range) float64 {
		n := 0
		for _, ns := range names {
			if owner(t, before, Hash(ns)) != owner(t, after, Hash(ns)) {
				n++
			}
		}
		return float64(n) / float64(len(names))
	}
	for n := 3; n <= 10; n++ {
		members := identities(n + 1)
		small, big := Assign(members[:n]), Assign(members)
		join := moved(small, big)
		leave := moved(big, Assign(append(slices.Clone(members[:1]), members[2:]...)))
		t.Logf("%d -> %d members: %.1f%% of namespaces moved (1/N = %.1f%%); a member leaving %d -> %d: %.1f%%",
			n, n+1, 100*join, 100/float64(n+1), n+1, n, 100*leave)
		if join > 2/float64(n+1) || leave > 2/float64(n+1) {
			t.Errorf("%d members: join moved %.3f, leave %.3f of the space; want at most %.3f", n, join, leave, 2/float64(n+1))
		}
	}
}

// TestThreeMembersShares: each of 3 members holds between 10% and 60%.
func TestThreeMembersShares(t *testing.T) {
	for _, members := range [][]string{identities(3), {"stencil-a", "stencil-b", "stencil-c"}, {"node-1", "node-2", "node-3"}} {
		a := Assign(members)
		var shares []string
		for _, m := range members {
			s := Share(a[m])
			shares = append(shares, fmt.Sprintf("%s %.1f%%", m, 100*s))
			if s < 0.10 || s > 0.60 {
				t.Errorf("%s holds %.3f of the space, want 0.10 to 0.60", m, s)
			}
		}
		t.Log(strings.Join(shares, ", "))
	}
}

// TestSelectorMatchesTheServersHash: the selector's ranges, as the API
// server's own sharding package parses them, hold a namespace exactly when
// Holds says so.
func TestSelectorMatchesTheServersHash(t *testing.T) {
	a := Assign(identities(3))
	for m, rs := range a {
		sel := Selector(rs)
		if !strings.HasPrefix(sel, "shardRange(object.metadata.namespace, '0x") {
			t.Fatalf("selector %q", sel)
		}
		for i := range 2000 {
			ns := fmt.Sprintf("ns-%d", i)
			h := "0x" + sharding.HashField(ns)
			inSel := false
			for _, r := range rs {
				start, end := bound(r.Start, false), bound(r.End, true)
				if !sharding.HexLess(h, start) && sharding.HexLess(h, end) {
					inSel = true
				}
			}
			if inSel != Holds(rs, ns) {
				t.Fatalf("%s: namespace %s: selector says %v, Holds says %v", m, ns, inSel, Holds(rs, ns))
			}
		}
	}
}

// TestMayWrite: the handover rule.
func TestMayWrite(t *testing.T) {
	members := identities(3)
	v := NewView(members)
	a := Assign(v.Members)
	var ns string
	for i := 0; ns == ""; i++ {
		if c := fmt.Sprintf("ns-%d", i); Holds(a[members[0]], c) {
			ns = c
		}
	}
	all := map[string]string{members[1]: v.ID(), members[2]: v.ID()}
	if ok, why := MayWrite(members[0], v, true, all, ns); !ok {
		t.Fatalf("the holder may not write for its namespace: %s", why)
	}
	if ok, _ := MayWrite(members[1], v, true, map[string]string{members[0]: v.ID(), members[2]: v.ID()}, ns); ok {
		t.Fatal("a member wrote for a namespace outside its share")
	}
	if ok, _ := MayWrite(members[0], v, false, all, ns); ok {
		t.Fatal("a member whose Lease expired wrote")
	}
	// A fourth member joins: until every member adopted the new view, no
	// one acting on it writes.
	joined := NewView(append(slices.Clone(members), "stencil-new"))
	partial := map[string]string{members[1]: joined.ID(), members[2]: v.ID(), "stencil-new": joined.ID()}
	if ok, why := MayWrite(members[0], joined, true, partial, ns); ok || !strings.Contains(why, members[2]) {
		t.Fatalf("wrote under a view %s has not adopted: %v %q", members[2], ok, why)
	}
	// The old view's holder cannot write either once another member moved on.
	if ok, _ := MayWrite(members[0], v, true, map[string]string{members[1]: joined.ID(), members[2]: v.ID()}, ns); ok {
		t.Fatal("wrote under the old view after a member adopted the new one")
	}
	if NewView([]string{"b", "a"}).ID() != NewView([]string{"a", "b", "a"}).ID() {
		t.Fatal("the view ID depends on order or duplicates")
	}
}
