package ring

import (
	"fmt"
	"maps"
	"math/rand/v2"
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

// words are the kind of names teams give namespaces.
var words = []string{"payments", "checkout", "search", "billing", "auth", "catalog", "orders", "shipping",
	"inventory", "reviews", "profile", "cart", "ledger", "gateway", "notify", "reports", "metrics", "media",
	"pricing", "promo", "support", "identity", "audit", "export"}

// namings returns n namespace names in each of the three namings the
// ring must divide evenly: sequential (team-0001 ...), words joined by
// dashes, and random hex (the only one an even split of the hash space
// handled).
func namings(n int, seed uint64) map[string][]string {
	r := rand.New(rand.NewPCG(seed, 1))
	out := map[string][]string{}
	for i := range n {
		out["sequential"] = append(out["sequential"], fmt.Sprintf("team-%04d", i+1))
		out["words"] = append(out["words"], fmt.Sprintf("%s-%s-%d", words[i%len(words)], words[(i/len(words))%len(words)], i/(len(words)*len(words))))
		out["hex"] = append(out["hex"], fmt.Sprintf("ns-%06x", r.Uint32()&0xffffff))
	}
	return out
}

// holderOf returns the member holding namespace ns, checking that exactly
// one does.
func holderOf(t *testing.T, a Assignment, ns string) string {
	t.Helper()
	var found []string
	for m, rs := range a.Ranges {
		if Holds(rs, ns) {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("namespace %s (hash %#x) held by %v, want exactly one member", ns, Hash(ns), found)
	}
	return found[0]
}

// TestAssignTilesTheSpace: for 1 to 10 members and no, one, or many
// namespaces, the ranges are sorted, disjoint, and cover [0, 2^64)
// exactly; Held counts what Holds says.
func TestAssignTilesTheSpace(t *testing.T) {
	for n := 1; n <= 10; n++ {
		for _, namespaces := range [][]string{nil, {"default"}, namings(30, 1)["sequential"], namings(1000, 2)["hex"]} {
			a := Assign(identities(n), namespaces)
			var all []Range
			for _, rs := range a.Ranges {
				all = append(all, rs...)
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
					t.Fatalf("%d members, %d namespaces: range %d starts at %#x, want %#x (gap or overlap)", n, len(namespaces), i, r.Start, next)
				}
				if r.End == 0 && i != len(all)-1 {
					t.Fatalf("%d members: range %d reaches the end of the space but is not last", n, i)
				}
				next = r.End
			}
			if next != 0 {
				t.Fatalf("%d members: the ranges end at %#x, want 2^64", n, next)
			}
			held := map[string]int{}
			for _, ns := range namespaces {
				held[holderOf(t, a, ns)]++
			}
			for m := range a.Ranges {
				if held[m] != a.Held[m] {
					t.Fatalf("%d members: %s holds %d namespaces by Holds, Held says %d", n, m, held[m], a.Held[m])
				}
			}
			if a.Namespaces != len(namespaces) {
				t.Fatalf("Namespaces = %d, want %d", a.Namespaces, len(namespaces))
			}
		}
	}
}

// TestAssignIsEvenWhateverTheNames: 1,000 namespaces of each naming among
// 3, 5 and 10 members: the largest share is within 1.25x of the mean
// (by construction it is at most ceil(1000/N)); and 30 namespaces among 3
// members split 10/10/10, the fault scenarios' case.
func TestAssignIsEvenWhateverTheNames(t *testing.T) {
	for naming, names := range namings(1000, 3) {
		for _, n := range []int{3, 5, 10} {
			a := Assign(identities(n), names)
			largest := 0
			for _, m := range identities(n) {
				largest = max(largest, a.Held[m])
			}
			mean := float64(len(names)) / float64(n)
			t.Logf("%s, %d members: largest share %d namespaces, %.2fx the mean", naming, n, largest, float64(largest)/mean)
			if float64(largest) > 1.25*mean {
				t.Errorf("%s, %d members: largest share %d, want at most %.0f", naming, n, largest, 1.25*mean)
			}
		}
	}
	for naming, names := range namings(30, 4) {
		a := Assign(identities(3), names)
		for _, m := range identities(3) {
			if a.Held[m] != 10 {
				t.Errorf("%s: 30 namespaces among 3 members: %v, want 10 each", naming, a.Held)
				break
			}
		}
	}
}

// moved counts the namespaces of names whose holder differs between a
// and b.
func moved(t *testing.T, a, b Assignment, names []string) int {
	n := 0
	for _, ns := range names {
		if holderOf(t, a, ns) != holderOf(t, b, ns) {
			n++
		}
	}
	return n
}

// TestAssignMovesFewWhenANamespaceComesOrGoes: a namespace added to 30 (or
// removed), among 3 members, moves at most 3 of the others, over 300
// draws of members and names in each naming.
func TestAssignMovesFewWhenANamespaceComesOrGoes(t *testing.T) {
	for naming := range namings(1, 0) {
		worst, total, kept := 0, 0, 0
		for draw := range 300 {
			names := namings(31, uint64(draw))[naming]
			members := []string{fmt.Sprintf("m%d-a", draw), fmt.Sprintf("m%d-b", draw), fmt.Sprintf("m%d-c", draw)}
			before, after := Assign(members, names[:30]), Assign(members, names)
			added := moved(t, before, after, names[:30])
			if maps.EqualFunc(before.Ranges, after.Ranges, slices.Equal) {
				kept++
			}
			removed := moved(t, after, Assign(members, names[1:]), names[1:])
			worst, total = max(worst, added, removed), total+added+removed
			if added > 3 || removed > 3 {
				t.Errorf("%s, draw %d: a namespace added moved %d others, one removed %d; want at most 3", naming, draw, added, removed)
			}
		}
		t.Logf("%s: a namespace added to or removed from 30 moved %.2f others on average, at most %d; %d of 300 additions changed no range (no handover)", naming, float64(total)/600, worst, kept)
	}
}

// TestAssignMovesLittleWhenAMemberJoinsOrLeaves: among 3 to 10 members
// over 1,000 namespaces, a member joining or leaving moves at most 2/N of
// the namespaces (1/N is the least any even split can move).
func TestAssignMovesLittleWhenAMemberJoinsOrLeaves(t *testing.T) {
	names := namings(1000, 5)["sequential"]
	for n := 3; n <= 10; n++ {
		members := identities(n + 1)
		small, big := Assign(members[:n], names), Assign(members, names)
		join := float64(moved(t, small, big, names)) / float64(len(names))
		leave := float64(moved(t, big, Assign(append(slices.Clone(members[:1]), members[2:]...), names), names)) / float64(len(names))
		t.Logf("%d -> %d members: %.1f%% of namespaces moved (1/N = %.1f%%); a member leaving %d -> %d: %.1f%%",
			n, n+1, 100*join, 100/float64(n+1), n+1, n, 100*leave)
		if join > 2/float64(n+1) || leave > 2/float64(n+1) {
			t.Errorf("%d members: join moved %.3f, leave %.3f of the namespaces; want at most %.3f", n, join, leave, 2/float64(n+1))
		}
	}
}

// TestSelectorMatchesTheServersHash: the selector's ranges, as the API
// server's own sharding package parses them, hold a namespace whenever
// Holds says so, and past MaxSelectorRanges only few more.
func TestSelectorMatchesTheServersHash(t *testing.T) {
	for _, names := range [][]string{namings(30, 6)["sequential"], namings(1000, 6)["words"]} {
		a := Assign(identities(3), names)
		for m, rs := range a.Ranges {
			sel := Selector(rs)
			if !strings.HasPrefix(sel, "shardRange(object.metadata.namespace, '0x") {
				t.Fatalf("selector %q", sel)
			}
			terms := cover(rs, MaxSelectorRanges)
			if got := strings.Count(sel, "shardRange("); got != len(terms) || got > MaxSelectorRanges {
				t.Fatalf("%s: %d terms in the selector, want %d and at most %d", m, got, len(terms), MaxSelectorRanges)
			}
			extra := 0
			for _, ns := range names {
				h := "0x" + sharding.HashField(ns)
				inSel := false
				for _, r := range terms {
					if !sharding.HexLess(h, bound(r.Start, false)) && sharding.HexLess(h, bound(r.End, true)) {
						inSel = true
					}
				}
				if Holds(rs, ns) && !inSel {
					t.Fatalf("%s: namespace %s held but not selected", m, ns)
				}
				if inSel && !Holds(rs, ns) {
					extra++
				}
			}
			t.Logf("%d namespaces: %s holds %d in %d ranges; the selector's %d terms send %d more", len(names), m, a.Held[m], len(rs), len(terms), extra)
			if len(rs) <= MaxSelectorRanges && extra > 0 {
				t.Fatalf("%s: the exact selector sends %d namespaces it does not hold", m, extra)
			}
		}
	}
}
