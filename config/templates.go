package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/fieldpath"
)

// Children that depend on each other (DESIGN.md): an item of an entry's
// templates is a path, or a mapping that gives the template an id, the
// templates it waits for (dependsOn) and what "ready" means for its
// children (readyWhen). The checks of readyWhen are Crossplane's
// readiness-check vocabulary: a field non-empty, a field equal to a
// value, a condition with a status.

// Template is one item of an entry's templates list.
type Template struct {
	// Path is the template file, relative to the config file.
	Path string `json:"path"`
	// ID names the template for dependsOn; empty means its path.
	ID string `json:"id,omitempty"`
	// DependsOn lists the templates (by id) whose children must all be
	// ready before this one renders.
	DependsOn []string `json:"dependsOn,omitempty" desc:"template id"`
	// ReadyWhen, when set, replaces stencil's readiness rules for this
	// template's children: each check holds for every child of its kind.
	ReadyWhen []ReadyCheck `json:"readyWhen,omitempty"`
}

// DecodeJSON reads a path alone, as every config before dependsOn wrote
// it, or the mapping.
func (t *Template) DecodeJSON(d *decode.Decoder, raw json.RawMessage, p *field.Path) field.ErrorList {
	if decode.Kind(raw) == "a string" {
		*t = Template{}
		return d.Decode(raw, reflect.ValueOf(&t.Path).Elem(), p, "")
	}
	return d.Struct(raw, reflect.ValueOf(t).Elem(), p)
}

// Describe words a template item for type errors.
func (Template) Describe() (one, many string) {
	names := "{" + strings.Join(decode.FieldNames(reflect.TypeFor[Template](), false), ", ") + "}"
	return "a path or a " + names + " mapping", "paths or " + names + " mappings"
}

// TemplatePaths returns the paths of the entry's templates, in file order.
func (r Resource) TemplatePaths() []string {
	out := make([]string, len(r.Templates))
	for i, t := range r.Templates {
		out[i] = t.Path
	}
	return out
}

// Name is how messages and dependsOn name the template: its id, or its
// path.
func (t Template) Name() string {
	if t.ID != "" {
		return t.ID
	}
	return t.Path
}

// ReadyCheck is one check of readyWhen: exactly one of NonEmpty, Equals
// and Condition.
type ReadyCheck struct {
	// Kind is the kind of the template's children the check applies to.
	Kind string `json:"kind"`
	// FieldPath is the field NonEmpty and Equals read, e.g.
	// spec.clusterIP or status.loadBalancer.ingress[0].ip.
	FieldPath string `json:"fieldPath,omitempty"`
	// NonEmpty holds when the field exists and is not "", 0, false, an
	// empty list or an empty mapping.
	NonEmpty bool `json:"nonEmpty,omitempty"`
	// Equals holds when the field, printed, is this value.
	Equals *Scalar `json:"equals,omitempty"`
	// Condition holds when status.conditions has this type with this
	// status.
	Condition *ConditionCheck `json:"condition,omitempty"`
}

// Describe words a check for type errors.
func (ReadyCheck) Describe() (one, many string) {
	return "a mapping such as {kind: Service, fieldPath: spec.clusterIP, nonEmpty: true}", "checks"
}

// Scalar is a string, number or boolean of the config, kept as the text
// it prints as: equals: 3 is "3".
type Scalar string

// DecodeJSON reads a string, number or boolean.
func (s *Scalar) DecodeJSON(d *decode.Decoder, raw json.RawMessage, p *field.Path) field.ErrorList {
	text, ok := decode.ScalarText(raw)
	if !ok {
		return d.TypeError(raw, reflect.TypeFor[Scalar](), p, "")
	}
	*s = Scalar(text)
	return nil
}

// Describe words a scalar for type errors.
func (Scalar) Describe() (one, many string) {
	return "a string, number or boolean", "strings, numbers or booleans"
}

// ConditionCheck is the condition a ReadyCheck looks for.
type ConditionCheck struct {
	// Type is the condition type, e.g. Available.
	Type string `json:"type"`
	// Status is "True", "False" or "Unknown".
	Status string `json:"status"`
}

// Describe words a condition for type errors.
func (ConditionCheck) Describe() (one, many string) {
	return `{type: TYPE, status: "True" | "False" | "Unknown"}`, "conditions"
}

// Holds reports whether obj, a child as the API server stores it, passes
// the check.
func (c ReadyCheck) Holds(obj map[string]any) bool {
	if c.Condition != nil {
		v, _ := fieldpath.Value(obj, "status.conditions")
		conds, _ := v.([]any)
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == c.Condition.Type {
				return m["status"] == c.Condition.Status
			}
		}
		return false
	}
	v, ok := fieldpath.Value(obj, c.FieldPath)
	if !ok {
		return false
	}
	if c.Equals != nil {
		return printedValue(v) == string(*c.Equals)
	}
	return !isEmptyValue(v)
}

// String describes the check for messages, e.g. "Service spec.clusterIP
// non-empty".
func (c ReadyCheck) String() string {
	switch {
	case c.Condition != nil:
		return fmt.Sprintf("%s condition %s=%s", c.Kind, c.Condition.Type, c.Condition.Status)
	case c.Equals != nil:
		return fmt.Sprintf("%s %s = %q", c.Kind, c.FieldPath, *c.Equals)
	}
	return fmt.Sprintf("%s %s non-empty", c.Kind, c.FieldPath)
}

func printedValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func isEmptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case int64:
		return x == 0
	case float64:
		return x == 0
	case json.Number:
		return x.String() == "0"
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// TemplateOrder returns the order templates render in: each after every
// template it depends on, otherwise in file order. A cycle returns the
// names along it, first name repeated last (a -> b -> a).
func TemplateOrder(items []Template) (order []int, cycle []string) {
	index := map[string]int{}
	for i, t := range items {
		index[t.Name()] = i
	}
	const (
		unseen = iota
		visiting
		done
	)
	state := make([]int, len(items))
	var stack []int
	var visit func(i int) bool
	visit = func(i int) bool {
		switch state[i] {
		case done:
			return true
		case visiting:
			at := slices.Index(stack, i)
			for _, j := range stack[at:] {
				cycle = append(cycle, items[j].Name())
			}
			cycle = append(cycle, items[i].Name())
			return false
		}
		state[i] = visiting
		stack = append(stack, i)
		for _, dep := range items[i].DependsOn {
			if j, ok := index[dep]; ok && !visit(j) {
				return false
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		order = append(order, i)
		return true
	}
	for i := range items {
		if !visit(i) {
			return nil, cycle
		}
	}
	return order, nil
}

// validateTemplates checks the ids, dependsOn and readyWhen kinds of the
// entry's templates, at p; file checks are validateFiles'.
func validateTemplates(r Resource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ids := map[string]int{}
	for j, t := range r.Templates {
		if k, dup := ids[t.Name()]; dup {
			if t.ID != "" || r.Templates[k].ID != "" {
				// Two paths alike are reported as a duplicate file.
				errs = append(errs, field.Duplicate(p.Index(j).Child("id"), t.Name()))
				errs[len(errs)-1].Detail = fmt.Sprintf("%q is also the id of templates[%d]: ids are unique within an entry", t.Name(), k)
			}
			continue
		}
		ids[t.Name()] = j
	}
	kinds := map[string]bool{}
	for _, k := range r.ChildGVKs() {
		kinds[k.Kind] = true
	}
	for j, t := range r.Templates {
		for k, dep := range t.DependsOn {
			dp := p.Index(j).Child("dependsOn").Index(k)
			switch _, known := ids[dep]; {
			case !known:
				errs = append(errs, field.Invalid(dp, dep, fmt.Sprintf("%q is not the id of a template of this entry", dep)))
			case dep == t.Name():
				errs = append(errs, field.Invalid(dp, dep, "a template cannot depend on itself"))
			}
		}
		for k, c := range t.ReadyWhen {
			if c.Kind != "" && !kinds[c.Kind] {
				errs = append(errs, field.Invalid(p.Index(j).Child("readyWhen").Index(k).Child("kind"), c.Kind, c.Kind+" is not a kind this entry's children list names"))
			}
		}
	}
	if _, cycle := TemplateOrder(r.Templates); cycle != nil {
		errs = append(errs, field.Invalid(p, strings.Join(cycle, " -> "), "dependsOn forms a cycle: "+strings.Join(cycle, " -> ")))
	}
	return errs
}
