package ring

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"k8s.io/apimachinery/pkg/sharding"
)

// ShardKey is the field the API server hashes for stencil's ring: a custom
// resource and its children share a namespace, so they stay together.
const ShardKey = "object.metadata.namespace"

// MaxSelectorRanges bounds the shardRange terms of one selector (about 85
// bytes each, in the URL of every list and watch). A member holds about
// two ranges for every three namespaces it holds (its namespaces rarely
// sit next to each other in hash order); past this many, the smallest
// gaps between its ranges are filled, the server sends more, and the
// member's own filter (Holds) drops it. The project's API server took
// 683 terms (58 kB) in test/integration's ring test.
const MaxSelectorRanges = 512

// Hash is the 64-bit FNV-1a hash of s, the hash the API server's
// shardRange uses (k8s.io/apimachinery/pkg/sharding.HashField). Its high
// bits barely depend on the last two or three bytes of s, which is why
// ranges follow the namespaces' hashes (see the package comment).
func Hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Range is the part [Start, End) of the 64-bit hash space; End 0 stands
// for 2^64, the end of the space.
type Range struct {
	Start, End uint64
}

// Contains reports whether h falls in r.
func (r Range) Contains(h uint64) bool {
	return h >= r.Start && (r.End == 0 || h < r.End)
}

// bound renders a bound the way shardRange expects it: 0x and 16 lowercase
// hex digits, or 0x10000000000000000 for the end of the space.
func bound(v uint64, end bool) string {
	if end && v == 0 {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", v)
}

// Assignment is how one set of members divides one set of namespaces.
type Assignment struct {
	// Ranges are each member's ranges, sorted and merged. Together they
	// tile the hash space, so a namespace no member knows of yet (created
	// a moment ago) has a holder: the member of the namespace before it
	// in hash order.
	Ranges map[string][]Range
	// Held is how many of the namespaces each member holds.
	Held map[string]int
	// Namespaces is how many namespaces were divided.
	Namespaces int
}

// Assign divides namespaces among members. Each namespace goes to the
// member it scores highest with (SHA-256 of both names), unless that
// member already holds its equal share, ceil(namespaces/members); pairs
// are taken best score first. Then the hash order of the namespaces is cut
// where the holder changes: a member's range runs from one of its
// namespaces' hashes to the next namespace's. The same members and
// namespaces give the same assignment on every replica, in any order.
// Namespaces with one hash (an FNV-1a collision) go together.
func Assign(members, namespaces []string) Assignment {
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	a := Assignment{Ranges: map[string][]Range{}, Held: map[string]int{}}
	if len(members) == 0 {
		return a
	}
	units := hashUnits(namespaces)
	for _, u := range units {
		a.Namespaces += u.names
	}
	if len(units) == 0 {
		// Nothing to divide yet: the first member holds the space until
		// the first namespace is seen.
		a.Ranges[members[0]] = []Range{{Start: 0, End: 0}}
		return a
	}
	holder := place(members, units)
	for i, u := range units {
		end := uint64(0)
		if i+1 < len(units) {
			end = units[i+1].hash
		}
		a.Ranges[holder[i]] = append(a.Ranges[holder[i]], Range{Start: u.hash, End: end})
		a.Held[holder[i]] += u.names
	}
	// [0, the first hash) wraps around to the last namespace's holder.
	if units[0].hash > 0 {
		last := holder[len(units)-1]
		a.Ranges[last] = append(a.Ranges[last], Range{Start: 0, End: units[0].hash})
	}
	for m, rs := range a.Ranges {
		a.Ranges[m] = merge(rs)
	}
	return a
}

// unit is the namespaces that share one hash: almost always one.
type unit struct {
	hash uint64
	// key names the unit for scoring: its smallest namespace name.
	key   string
	names int
}

// hashUnits returns the distinct namespaces grouped by hash, in hash order.
func hashUnits(namespaces []string) []unit {
	names := slices.Compact(slices.Sorted(slices.Values(namespaces)))
	us := make([]unit, 0, len(names))
	for _, ns := range names {
		us = append(us, unit{hash: Hash(ns), key: ns, names: 1})
	}
	// Stable: within one hash, the smallest name comes first.
	slices.SortStableFunc(us, func(a, b unit) int { return cmp.Compare(a.hash, b.hash) })
	out := us[:0]
	for _, u := range us {
		if n := len(out); n > 0 && out[n-1].hash == u.hash {
			out[n-1].names++
			continue
		}
		out = append(out, u)
	}
	return out
}

// place returns the holder of each unit: best-scoring pairs first, each
// member taking at most ceil(units/members). A namespace added moves at
// most a few others (the one whose slot it took, and so on: measured in
// assign_test.go), and a member joining or leaving moves about 1/N.
func place(members []string, units []unit) []string {
	type pair struct {
		score  uint64
		member int
		unit   int
	}
	pairs := make([]pair, 0, len(members)*len(units))
	for ui, u := range units {
		for mi, m := range members {
			pairs = append(pairs, pair{score: score(m, u.key), member: mi, unit: ui})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.member, b.member), cmp.Compare(a.unit, b.unit))
	})
	capacity := (len(units) + len(members) - 1) / len(members)
	load := make([]int, len(members))
	holder := make([]string, len(units))
	placed := 0
	for _, p := range pairs {
		if holder[p.unit] != "" || load[p.member] >= capacity {
			continue
		}
		holder[p.unit] = members[p.member]
		load[p.member]++
		if placed++; placed == len(units) {
			break
		}
	}
	return holder
}

// score is how much member m wants namespace ns: SHA-256, not FNV-1a,
// whose high bits would rank near-identical names alike.
func score(m, ns string) uint64 {
	sum := sha256.Sum256([]byte(m + "\x00" + ns))
	return binary.BigEndian.Uint64(sum[:8])
}

// merge sorts rs and joins adjacent ranges.
func merge(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.Start, b.Start) })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].End != 0 && out[n-1].End == r.Start {
			out[n-1].End = r.End
			continue
		}
		out = append(out, r)
	}
	return out
}

// Holds reports whether rs hold namespace ns.
func Holds(rs []Range, ns string) bool {
	h := Hash(ns)
	for _, r := range rs {
		if r.Contains(h) {
			return true
		}
	}
	return false
}

// Selector returns the shardSelector (ListOptions.ShardSelector, alpha in
// Kubernetes 1.36 behind the ShardedListAndWatch gate) that asks for the
// namespaces of rs: one shardRange per range, joined by ||, at most
// MaxSelectorRanges of them (a superset of rs past that).
func Selector(rs []Range) string {
	rs = cover(rs, MaxSelectorRanges)
	reqs := make([]sharding.ShardRangeRequirement, 0, len(rs))
	for _, r := range rs {
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: ShardKey, Start: bound(r.Start, false), End: bound(r.End, true)})
	}
	return sharding.NewSelector(reqs...).String()
}

// cover returns at most limit ranges that contain rs (sorted, merged):
// the smallest gaps between consecutive ranges are filled first.
func cover(rs []Range, limit int) []Range {
	if len(rs) <= limit || limit < 1 {
		return rs
	}
	gaps := make([]int, len(rs)-1) // gap i lies between rs[i] and rs[i+1]
	for i := range gaps {
		gaps[i] = i
	}
	size := func(i int) uint64 { return rs[i+1].Start - rs[i].End }
	slices.SortStableFunc(gaps, func(a, b int) int { return cmp.Compare(size(a), size(b)) })
	fill := make([]bool, len(rs)-1)
	for _, g := range gaps[:len(rs)-limit] {
		fill[g] = true
	}
	out := []Range{rs[0]}
	for i := 1; i < len(rs); i++ {
		if fill[i-1] {
			out[len(out)-1].End = rs[i].End
			continue
		}
		out = append(out, rs[i])
	}
	return out
}
