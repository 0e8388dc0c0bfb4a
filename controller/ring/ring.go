// Package ring splits namespaces among the live members of a ring of
// stencil replicas (stencil run --ring, docs/operating.md "A ring of
// replicas"): which hash ranges each member holds, the shard selector that
// asks the API server for exactly those (KEP-5866 sharded list and watch),
// and the rule that decides when a member may write for a namespace.
//
// It is the ring's arithmetic and protocol only, each a function of its
// inputs, with no client and no clock of its own; the membership Leases and
// the wiring into the controller's informers and write fence come on top.
//
// The choice a newcomer may question: namespaces are placed by consistent
// hashing with a fixed number of points per member, not by cutting the
// hash space into N equal slices. Equal slices move almost every namespace
// when a member joins or leaves (slice i of 3 is not slice i of 4); with
// points on a ring, a change of one member moves only about 1/N of the
// space, and so only the caches and writes of that part change hands.
package ring

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/sharding"
)

// ShardKey is the field the API server hashes for stencil's ring: a custom
// resource and its children share a namespace, so they stay together.
const ShardKey = "object.metadata.namespace"

// DefaultPoints is how many points each member places on the ring: enough
// that three members' shares stay within a few points of a third.
const DefaultPoints = 64

// Hash is the 64-bit FNV-1a hash of s, the hash the API server's
// shardRange uses (k8s.io/apimachinery/pkg/sharding.HashField). Its high
// bits barely depend on the last two or three bytes of s: namespaces named
// team-01 ... team-99 all fall into one sliver of the space, and so to one
// member. The hash is the API server's, not stencil's to change; the docs
// say so (docs/operating.md, "A ring of replicas").
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

// size returns the number of hashes in r, as a float (2^64 does not fit).
func (r Range) size() float64 {
	if r.End == 0 {
		return math.Exp2(64) - float64(r.Start)
	}
	return float64(r.End - r.Start)
}

// bound renders a bound the way shardRange expects it: 0x and 16 lowercase
// hex digits, or 0x10000000000000000 for the end of the space.
func bound(v uint64, end bool) string {
	if end && v == 0 {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", v)
}

// Assign places DefaultPoints points per member on the ring and returns
// each member's ranges, sorted and merged: a hash belongs to the member of
// the nearest point at or below it (wrapping around). The ranges of all
// members tile the space exactly. The same members give the same
// assignment on every replica, whatever their order.
func Assign(members []string) map[string][]Range {
	return assign(members, DefaultPoints)
}

type point struct {
	at     uint64
	member string
}

func assign(members []string, points int) map[string][]Range {
	out := map[string][]Range{}
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	if len(members) == 0 {
		return out
	}
	var ring []point
	for _, m := range members {
		for i := range points {
			ring = append(ring, point{at: pointHash(m, i), member: m})
		}
	}
	slices.SortFunc(ring, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.member, b.member))
	})
	// [0, first point) wraps around to the last point's member.
	if ring[0].at > 0 {
		out[ring[len(ring)-1].member] = append(out[ring[len(ring)-1].member], Range{Start: 0, End: ring[0].at})
	}
	for i, p := range ring {
		end := uint64(0)
		if i+1 < len(ring) {
			end = ring[i+1].at
		}
		if end != 0 && end == p.at {
			continue // two points at one hash: the next one owns it
		}
		out[p.member] = append(out[p.member], Range{Start: p.at, End: end})
	}
	for m, rs := range out {
		out[m] = merge(rs)
	}
	return out
}

// pointHash places member m's i-th point. Not FNV-1a: its high bits barely
// change between "m#1" and "m#2", so the points of one member would bunch
// together (one of three members held 63% of the space); SHA-256 spreads
// them. Only namespaces must hash as the API server hashes them.
func pointHash(m string, i int) uint64 {
	sum := sha256.Sum256([]byte(m + "#" + strconv.Itoa(i)))
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

// Share returns the fraction of the hash space rs covers.
func Share(rs []Range) float64 {
	total := 0.0
	for _, r := range rs {
		total += r.size()
	}
	return total / math.Exp2(64)
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
// namespaces of rs: one shardRange per range, joined by ||.
func Selector(rs []Range) string {
	reqs := make([]sharding.ShardRangeRequirement, 0, len(rs))
	for _, r := range rs {
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: ShardKey, Start: bound(r.Start, false), End: bound(r.End, true)})
	}
	return sharding.NewSelector(reqs...).String()
}
