package budget

import (
	"maps"
	"slices"
	"testing"

	"stencil.dev/stencil/templates/funcs"
)

// The prices live in this package's tables, not yet in the policy table
// (funcs/policy.go says why): every name they price is one the policy
// table classifies, so that a misspelt or removed name fails here rather
// than leaving a function unpriced.
func TestPricedFunctionsAreClassified(t *testing.T) {
	for table, names := range map[string][]string{
		"guards":           slices.Collect(maps.Keys(guards)),
		"perByte":          slices.Collect(maps.Keys(perByte)),
		"fixedCost":        slices.Collect(maps.Keys(fixedCost)),
		"serialiserWeight": slices.Collect(maps.Keys(serialiserWeight)),
		"indenting":        slices.Collect(maps.Keys(indenting)),
	} {
		for _, name := range names {
			if _, ok := funcs.ClassOf(name); !ok {
				t.Errorf("%s prices %s, which templates/funcs/policy.go does not classify", table, name)
			}
		}
	}
}
