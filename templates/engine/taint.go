package engine

import (
	"reflect"
	"strings"
	"text/template"
	"unsafe"
)

// Taint by construction. A string is the tenant's when its bytes live in
// the render's arena: the spec is copied there before the render (Value),
// keys included, so every string a chart reads from it is tainted without
// a list of where tenant text may go. Go's strings are immutable and Go's
// heap does not move, so a substring (trunc, trim, index, slice) still
// points into the arena and stays tainted; a function that builds a new
// string loses the pointer, so every function a render calls is wrapped
// (Wrap) to copy its string results into the arena when an argument was
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

// Wrap returns funcs, each wrapped once, the same way, whatever it does:
// it computes on the real text (placeholders in its string parameters
// resolved; a value of any type is passed as it is, so that one it
// selects or prints keeps its placeholders), and a string it returns is
// tainted when an argument held tenant text. A structure it builds from a tainted string argument (a
// parser's map, a split's list) has its strings tainted; one it returns
// from structures it was given keeps their strings as they are (tainted
// where they were). The rewrite's own functions (named "__...") are
// left as they are.
func (t *Taint) Wrap(funcs template.FuncMap) template.FuncMap {
	out := make(template.FuncMap, len(funcs))
	for name, fn := range funcs {
		if strings.HasPrefix(name, "__") {
			out[name] = fn
			continue
		}
		out[name] = t.wrap(fn)
	}
	return out
}

// str taints r, built by a call, when tainted() says an argument held
// tenant text (asked only when r is new text).
func (t *Taint) str(r string, tainted func() bool) string {
	if len(r) == 0 || t.Of(r) || !tainted() {
		return r
	}
	return t.String(r)
}

// given reports whether r is one of args itself (the same bytes, not an
// equal copy): a function that selects (default, ternary, first, index)
// returns a value it was given, whose taint is its own.
func given(r string, args []any) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && len(s) == len(r) && unsafe.StringData(s) == unsafe.StringData(r) {
			return true
		}
	}
	return false
}

func (t *Taint) wrap(fn any) any {
	switch f := fn.(type) {
	case func(string) string:
		return func(s string) string {
			s = t.Arg(s)
			return t.str(f(s), func() bool { return t.Of(s) })
		}
	case func(int, string) string:
		return func(n int, s string) string {
			s = t.Arg(s)
			return t.str(f(n, s), func() bool { return t.Of(s) })
		}
	case func(string, string) string:
		return func(a, b string) string {
			a, b = t.Arg(a), t.Arg(b)
			return t.str(f(a, b), func() bool { return t.Of(a) || t.Of(b) })
		}
	case func(any) string:
		return func(v any) string {
			return t.str(f(v), func() bool { return t.Holds(v) })
		}
	case func(...any) string:
		return func(args ...any) string {
			return t.str(f(args...), func() bool { return t.holdsAny(args) })
		}
	case func(string, ...any) string:
		return func(format string, args ...any) string {
			format = t.Arg(format)
			return t.str(f(format, args...), func() bool { return t.Of(format) || t.holdsAny(args) })
		}
	case func(any, ...any) any:
		return func(v any, args ...any) any {
			r := f(v, args...)
			if s, ok := r.(string); ok && !given(s, append(args, v)) {
				return t.str(s, func() bool { return t.Holds(v) || t.holdsAny(args) })
			}
			return r
		}
	}
	return t.wrapReflect(fn)
}

func (t *Taint) holdsAny(args []any) bool {
	for _, a := range args {
		if t.Holds(a) {
			return true
		}
	}
	return false
}

// wrapReflect is wrap for the signatures without a typed form.
func (t *Taint) wrapReflect(fn any) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	if ft.Kind() != reflect.Func || ft.NumOut() == 0 {
		return fn
	}
	return reflect.MakeFunc(ft, func(in []reflect.Value) []reflect.Value {
		// strArg: a string parameter got tenant text, so what the call
		// builds from it (a parser's map, a split) is the tenant's.
		strArg := false
		var others []any
		for i, v := range in {
			if ft.IsVariadic() && i == len(in)-1 {
				for j := range v.Len() {
					e := v.Index(j)
					switch {
					case e.Kind() == reflect.String:
						s := t.Arg(e.String())
						e.Set(reflect.ValueOf(s).Convert(e.Type()))
						strArg = strArg || t.Of(s)
					case e.Kind() == reflect.Interface && !e.IsNil():
						others = append(others, e.Interface())
					}
				}
				continue
			}
			switch {
			case v.Kind() == reflect.String:
				s := t.Arg(v.String())
				in[i] = reflect.ValueOf(s).Convert(v.Type())
				strArg = strArg || t.Of(s)
			case v.Kind() == reflect.Interface && !v.IsNil(), v.Kind() == reflect.Map, v.Kind() == reflect.Slice:
				others = append(others, v.Interface())
			}
		}
		var out []reflect.Value
		if ft.IsVariadic() {
			out = fv.CallSlice(in)
		} else {
			out = fv.Call(in)
		}
		tainted := func() bool { return strArg || t.holdsAny(others) }
		r := out[0]
		switch {
		case r.Kind() == reflect.String:
			out[0] = reflect.ValueOf(t.str(r.String(), tainted)).Convert(r.Type())
		case r.Kind() == reflect.Interface && !r.IsNil():
			var v any
			if s, ok := r.Interface().(string); ok {
				if given(s, others) {
					return out
				}
				v = t.str(s, tainted)
			} else if strArg {
				v = t.Value(r.Interface())
			} else {
				return out
			}
			out[0] = reflect.ValueOf(&v).Elem()
		case strArg && r.CanInterface() && (r.Kind() == reflect.Map || r.Kind() == reflect.Slice):
			if v := t.Value(r.Interface()); reflect.TypeOf(v) == r.Type() {
				out[0] = reflect.ValueOf(v)
			}
		}
		return out
	}).Interface()
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
