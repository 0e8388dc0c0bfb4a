package budget

import (
	"maps"
	"slices"
	"testing"

	"stencil.dev/stencil/templates/funcs"
)

// The prices live in the policy table (funcs.PriceOf); the guards, which
// are code, live here: every name they check is one the policy table
// classifies, so that a misspelt or removed name fails here rather than
// leaving a function unchecked.
func TestPricedFunctionsAreClassified(t *testing.T) {
	for table, names := range map[string][]string{
		"guards": slices.Collect(maps.Keys(guards)),
	} {
		for _, name := range names {
			if _, ok := funcs.ClassOf(name); !ok {
				t.Errorf("%s prices %s, which templates/funcs/policy.go does not classify", table, name)
			}
		}
	}
}
