package engine

import (
	"testing"

	"stencil.dev/stencil/templates/funcs"
)

// refusedFuncs refuses some functions at load: every name of it is one
// the policy table classifies.
func TestEngineTablesNameClassifiedFunctions(t *testing.T) {
	for name := range refusedFuncs {
		if _, ok := funcs.ClassOf(name); !ok {
			t.Errorf("refusedFuncs refuses %s, which templates/funcs/policy.go does not classify", name)
		}
	}
}
