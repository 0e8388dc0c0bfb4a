package templates

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
)

// resultNodes counts the values of a render's children as the templates
// make them, against renderBudget.resultNodes: what a result costs a
// process to hold is its values, not its bytes (5 MiB of "[{},{},...]"
// decodes to about 118 MiB of Go maps). Counted here, the error names
// the template whose objects went past the bound; the render worker and
// the controller count the encoded result again before they send or
// decode it (package renderworker).
type resultNodes struct {
	n, bound int64
}

// add counts u, rendered by template, and fails once the render's values
// pass the bound.
func (c *resultNodes) add(template string, u *unstructured.Unstructured) error {
	c.n += countValues(u.Object)
	if c.bound > 0 && c.n > c.bound {
		return &engine.RenderError{Template: template, Err: &budget.Error{Bound: "resultNodes", Limit: c.bound,
			What: fmt.Sprintf("the render's objects hold more than %d values, counted up to %s %s", c.bound, u.GetKind(), u.GetName())}}
	}
	return nil
}

// countValues counts v and every value nested in it: mappings, lists and
// scalars, as jsonNodes counts their JSON (package renderworker).
func countValues(v any) int64 {
	n := int64(1)
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += countValues(e)
		}
	case []any:
		for _, e := range x {
			n += countValues(e)
		}
	}
	return n
}
