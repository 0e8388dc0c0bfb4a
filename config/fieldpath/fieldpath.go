// Package fieldpath reads a dotted field path with optional list indexes
// (status.loadBalancer.ingress[0].ip), the form readyWhen checks name a
// child's field in: parsed when the config loads, to refuse a malformed
// path there, and read from each live child the check runs on.
//
// The choice a newcomer may question: this is not JSONPath or
// k8s.io/client-go/util/jsonpath. A check names one field; a language with
// filters and wildcards would let it name many, and "ready" would then
// need a rule for which of them counts.
package fieldpath

import (
	"fmt"
	"strconv"
	"strings"
)

// Value reads path from obj: nothing when a step is missing, is not a
// mapping or a list, or the path does not parse.
func Value(obj map[string]any, path string) (any, bool) {
	steps, err := Parse(path)
	if err != nil {
		return nil, false
	}
	var cur any = obj
	for _, s := range steps {
		switch {
		case s.Index >= 0:
			l, ok := cur.([]any)
			if !ok || s.Index >= len(l) {
				return nil, false
			}
			cur = l[s.Index]
		default:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[s.Field]; !ok {
				return nil, false
			}
		}
	}
	return cur, true
}

// Step is one field or list index of a field path.
type Step struct {
	Field string
	Index int // -1 for a field
}

// Parse splits path into its steps, or says why it is not a field path.
func Parse(path string) ([]Step, error) {
	if path == "" {
		return nil, fmt.Errorf("is empty")
	}
	var out []Step
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name == "" {
			return nil, fmt.Errorf("%q: a field name is empty", path)
		}
		out = append(out, Step{Field: name, Index: -1})
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("%q: a list index must be a whole number, as in ingress[0]", path)
			}
			out = append(out, Step{Index: n})
			if after == "" {
				break
			}
			if !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("%q: unexpected %q after an index", path, after)
			}
			rest = after[1:]
		}
	}
	return out, nil
}
