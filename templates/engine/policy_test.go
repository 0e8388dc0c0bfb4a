package engine

import (
	"strings"
	"testing"

	"stencil.dev/stencil/templates/funcs"
)

// measuredFuncs prices functions beside the policy table (funcs/policy.go
// says why), and refusedFuncs refuses some at load: every name of either
// that is not the rewrite's own is one the policy table classifies.
func TestEngineTablesNameClassifiedFunctions(t *testing.T) {
	for name := range measuredFuncs {
		if _, ok := funcs.ClassOf(name); !ok && !strings.HasPrefix(name, "__") {
			t.Errorf("measuredFuncs prices %s, which templates/funcs/policy.go does not classify", name)
		}
	}
	for name := range refusedFuncs {
		if _, ok := funcs.ClassOf(name); !ok {
			t.Errorf("refusedFuncs refuses %s, which templates/funcs/policy.go does not classify", name)
		}
	}
}
