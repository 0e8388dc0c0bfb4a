package engine

import (
	"iter"
	"maps"
	"slices"
)

// The unstructured values a render handles (a spec, a read object, what a
// function returned) are maps with string keys, lists, []string,
// map[string]string and scalars. Taint and placement each need every
// string of one, keys included: they walk it here, once, and differ only
// in what they do with a string.

// anyString reports whether f holds for a string of v, keys included.
func anyString(v any, f func(string) bool) bool {
	switch v := v.(type) {
	case string:
		return f(v)
	case map[string]any:
		for k, e := range v {
			if f(k) || anyString(e, f) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if anyString(e, f) {
				return true
			}
		}
	case []string:
		return slices.ContainsFunc(v, f)
	case map[string]string:
		for k, e := range v {
			if f(k) || f(e) {
				return true
			}
		}
	}
	return false
}

// mapStrings returns a copy of v with every string s, keys included,
// replaced by f(s): each map and list is copied, of its own type, and
// scalars are kept. With sorted, a map's keys are visited in order, each
// before its value, so that what f records (a placeholder) numbers in the
// order of the keys: a serialiser sorts a map by its keys, and numbered in
// Go's map order they would write the tenant's keys in another order on
// every render.
func mapStrings(v any, f func(string) string, sorted bool) any {
	switch v := v.(type) {
	case string:
		return f(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k := range keys(v, sorted) {
			out[f(k)] = mapStrings(v[k], f, sorted)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = mapStrings(e, f, sorted)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = f(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(v))
		for k := range keys(v, sorted) {
			out[f(k)] = f(v[k])
		}
		return out
	}
	return v
}

// keys yields m's keys, sorted or in Go's map order (without a copy).
func keys[V any](m map[string]V, sorted bool) iter.Seq[string] {
	if sorted {
		return slices.Values(slices.Sorted(maps.Keys(m)))
	}
	return maps.Keys(m)
}
