package engine

import (
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
		if !sorted {
			for k, e := range v {
				out[f(k)] = mapStrings(e, f, sorted)
			}
			return out
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
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
		if !sorted {
			for k, e := range v {
				out[f(k)] = f(e)
			}
			return out
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out[f(k)] = f(v[k])
		}
		return out
	}
	return v
}
