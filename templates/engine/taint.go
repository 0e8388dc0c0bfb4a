package engine

import (
	"strings"
	"unsafe"
)

// Taint by construction. A string is the tenant's when its bytes live in
// the render's arena: the spec is copied there before the render (Value),
// keys included, so every string a chart reads from it is tainted without
// a list of where tenant text may go. Go's strings are immutable and Go's
// heap does not move, so a substring (trunc, trim, index, slice) still
// points into the arena and stays tainted; a function that builds a new
// string loses the pointer, so every function a render calls is wrapped
// (budget.Wrap, with the taint) to copy its string results into the arena when an argument was
// tainted. Nothing a tenant writes can make a string point into the arena,
// and no platform string is ever there unless it was computed from
// tenant text: the marker cannot be forged or dropped.
type Taint struct {
	// chunks are the arena's blocks, never grown in place (a string
	// points into one).
	chunks [][]byte
	// cur is the block being filled.
	cur []byte
	// st resolves placeholders in function arguments (nil: none).
	st *State
}

// The arena's blocks start small and double up to maxChunk: most specs
// fit in the first, and a render that taints more pays for a few more.
// (One 64 KiB block per render was a quarter of what chart mode
// allocated, for a spec of a few hundred bytes.)
const (
	firstChunk = 1 << 10
	maxChunk   = 64 << 10
)

// NewTaint returns an empty arena whose functions resolve st's
// placeholders in the text they are given.
func NewTaint(st *State) *Taint { return &Taint{st: st} }

// Reset empties the arena for the next render. The strings of the last
// render keep the blocks they point into; no string of theirs is tainted
// any more, and nothing the next render taints is written over them.
func (t *Taint) Reset() { t.chunks, t.cur = nil, nil }

// Of reports whether s is tainted: its bytes are in the arena.
func (t *Taint) Of(s string) bool {
	if t == nil || len(s) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	for _, c := range t.chunks {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(c)))
		if p >= base && p < base+uintptr(cap(c)) {
			return true
		}
	}
	return false
}

// String returns s tainted: s itself when it is, else a copy in the arena.
func (t *Taint) String(s string) string {
	if len(s) == 0 || t.Of(s) {
		return s
	}
	if cap(t.cur)-len(t.cur) < len(s) {
		t.cur = make([]byte, 0, max(min(2*cap(t.cur), maxChunk), firstChunk, len(s)))
		t.chunks = append(t.chunks, t.cur)
	}
	start := len(t.cur)
	t.cur = append(t.cur, s...)
	return unsafe.String(&t.cur[start], len(s))
}

// Value returns a copy of v with every string, keys included, tainted.
func (t *Taint) Value(v any) any { return mapStrings(v, t.String, false) }

// Arg is a function's string argument as the function must see it: its
// placeholders resolved to their text, tainted (every placeholder of a
// render with an arena stands for tenant text).
func (t *Taint) Arg(s string) string {
	if t.st == nil || !strings.Contains(s, t.st.mark) {
		return s
	}
	return t.String(t.st.ResolveIndented(s))
}

// Holds reports whether v holds a tainted string, keys included. Text
// with placeholders does not: it is structure the chart made, with the
// tenant's text placed (a function that resolves them taints what it
// gets, see Arg).
func (t *Taint) Holds(v any) bool { return anyString(v, t.Of) }

// Placeholders returns v for a serialiser: a copy with each tainted
// string, keys included, a quoted placeholder (QuotePlaceholders quotes
// it in YAML), numbered in the order of the keys, or v itself when it
// holds none.
func (st *State) Placeholders(v any, t *Taint) any {
	if !t.Holds(v) {
		return v
	}
	return mapStrings(v, func(s string) string {
		if !t.Of(s) {
			return s
		}
		return st.token(kindYAMLQuoted, s, "")
	}, true)
}

// QuotePlaceholders quotes each of the render's placeholders in s, YAML a
// serialiser wrote, so that each stands as a string wherever the data
// lands.
func (st *State) QuotePlaceholders(s string) string {
	if !strings.Contains(s, st.mark) {
		return s
	}
	return tokenPattern.ReplaceAllStringFunc(s, func(tok string) string {
		if !strings.HasPrefix(tok, st.mark) {
			return tok
		}
		return `"` + tok + `"`
	})
}
