package funcs

import (
	"maps"
	"slices"
	"text/template"
)

// Zero writes when converged rests on a render being the same on every
// pass and every replica. Sprig's keys and values (and so Helm's) list a
// map in Go's iteration order, which is drawn afresh on every range over
// the map: {{ keys .Spec.labels | join "," }} would rewrite its child on
// every sync. Both modes bind the stand-ins below in their place. Since
// Helm's result is any one of the orders, the sorted one is one of Helm's
// outputs: a chart renders as helm template may.

// ordered are the sorted stand-ins of the functions of class MapOrder,
// with sprig's signatures, so that the budget and the taint wrap them as
// they wrapped sprig's.
var ordered = map[string]any{"keys": sortedKeys, "values": sortedValues}

// Ordered binds in m, and returns it, the sorted stand-in of every
// function of class MapOrder: each mode calls it on the table it binds.
func Ordered(m template.FuncMap) template.FuncMap {
	for _, name := range Named(MapOrder) {
		m[name] = ordered[name]
	}
	return m
}

// sortedKeys is keys: each map's keys sorted, the maps' lists joined in
// the order of the arguments, as sprig joins them. (All of them sorted as
// one list would not be one of Helm's outputs: keys of {b} and {a} is
// [b a] in every order.)
func sortedKeys(dicts ...map[string]any) []string {
	k := []string{}
	for _, d := range dicts {
		k = append(k, slices.Sorted(maps.Keys(d))...)
	}
	return k
}

// sortedValues is values: the map's values in the order of its sorted
// keys, so that values and keys of one map line up.
func sortedValues(d map[string]any) []any {
	out := make([]any, 0, len(d))
	for _, k := range slices.Sorted(maps.Keys(d)) {
		out = append(out, d[k])
	}
	return out
}
