package chart

import (
	"maps"
	"slices"
	"strconv"
)

// fieldPaths lists the field paths of v, sorted, each key that is one of
// names (a tenant's string, or what replaced it) written as "*": the
// shape of the object, not its values.
func fieldPaths(v any, names map[string]bool) []string {
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			out = append(out, path+"{}")
			for _, k := range slices.Sorted(maps.Keys(v)) {
				name := k
				if names[k] {
					name = "*"
				}
				walk(v[k], path+"."+name)
			}
		case []any:
			out = append(out, path+"[]")
			for i, e := range v {
				walk(e, path+"["+strconv.Itoa(i)+"]")
			}
		default:
			out = append(out, path)
		}
	}
	walk(v, "")
	slices.Sort(out)
	return out
}
