package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
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
	DependsOn []string `json:"dependsOn,omitempty"`
	// ReadyWhen, when set, replaces stencil's readiness rules for this
	// template's children: each check holds for every child of its kind.
	ReadyWhen []ReadyCheck `json:"readyWhen,omitempty"`
}

// UnmarshalJSON reads a path alone, as every config before dependsOn
// wrote it, or the mapping.
func (t *Template) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		*t = Template{}
		return json.Unmarshal(b, &t.Path)
	}
	type plain Template
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*t = Template(p)
	return nil
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
	Equals *string `json:"equals,omitempty"`
	// Condition holds when status.conditions has this type with this
	// status.
	Condition *ConditionCheck `json:"condition,omitempty"`
}

// UnmarshalJSON reads equals as written: a string, a number or a boolean,
// kept as its printed form.
func (c *ReadyCheck) UnmarshalJSON(b []byte) error {
	var raw struct {
		Kind      string          `json:"kind"`
		FieldPath string          `json:"fieldPath,omitempty"`
		NonEmpty  bool            `json:"nonEmpty,omitempty"`
		Equals    any             `json:"equals,omitempty"`
		Condition *ConditionCheck `json:"condition,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*c = ReadyCheck{Kind: raw.Kind, FieldPath: raw.FieldPath, NonEmpty: raw.NonEmpty, Condition: raw.Condition}
	if raw.Equals != nil {
		s := fmt.Sprint(raw.Equals)
		c.Equals = &s
	}
	return nil
}

// ConditionCheck is the condition a ReadyCheck looks for.
type ConditionCheck struct {
	// Type is the condition type, e.g. Available.
	Type string `json:"type"`
	// Status is "True", "False" or "Unknown".
	Status string `json:"status"`
}

// Holds reports whether obj, a child as the API server stores it, passes
// the check.
func (c ReadyCheck) Holds(obj map[string]any) bool {
	if c.Condition != nil {
		v, _ := FieldPathValue(obj, "status.conditions")
		conds, _ := v.([]any)
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == c.Condition.Type {
				return m["status"] == c.Condition.Status
			}
		}
		return false
	}
	v, ok := FieldPathValue(obj, c.FieldPath)
	if !ok {
		return false
	}
	if c.Equals != nil {
		return printedValue(v) == *c.Equals
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

// FieldPathValue reads a dotted field path with optional list indexes
// (status.loadBalancer.ingress[0].ip) from obj.
func FieldPathValue(obj map[string]any, path string) (any, bool) {
	steps, err := parseFieldPath(path)
	if err != nil {
		return nil, false
	}
	var cur any = obj
	for _, s := range steps {
		switch {
		case s.index >= 0:
			l, ok := cur.([]any)
			if !ok || s.index >= len(l) {
				return nil, false
			}
			cur = l[s.index]
		default:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[s.field]; !ok {
				return nil, false
			}
		}
	}
	return cur, true
}

// pathStep is one field or list index of a field path.
type pathStep struct {
	field string
	index int // -1 for a field
}

func parseFieldPath(path string) ([]pathStep, error) {
	if path == "" {
		return nil, fmt.Errorf("is empty")
	}
	var out []pathStep
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name == "" {
			return nil, fmt.Errorf("%q: a field name is empty", path)
		}
		out = append(out, pathStep{field: name, index: -1})
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("%q: a list index must be a whole number, as in ingress[0]", path)
			}
			out = append(out, pathStep{index: n})
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

var templateFields = []string{"path", "id", "dependsOn", "readyWhen"}

var readyCheckFields = []string{"kind", "fieldPath", "nonEmpty", "equals", "condition"}

// decodeTemplates reads an entry's templates list: paths, or mappings.
func (d *decoder) decodeTemplates(i int, entry string, v any) []Template {
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		d.addf(entry, "templates", "must be a list of paths or {path, id, dependsOn, readyWhen} mappings, not %s", jsonType(v))
		d.markBad(i, "templates")
		return nil
	}
	out := make([]Template, 0, len(l))
	for j, e := range l {
		field := fmt.Sprintf("templates[%d]", j)
		switch x := e.(type) {
		case string:
			out = append(out, Template{Path: x})
		case map[string]any:
			t, ok := d.decodeTemplate(entry, field, x)
			if !ok {
				// Something inside templates[j] is wrong; its path may be fine.
				d.markBad(i, field+".*")
			}
			out = append(out, t)
		default:
			d.addf(entry, field, "must be a path or a {path, id, dependsOn, readyWhen} mapping, not %s", jsonType(e))
			d.markBad(i, field)
			out = append(out, Template{})
		}
	}
	return out
}

// decodeTemplate reads one mapping of the templates list.
func (d *decoder) decodeTemplate(entry, field string, m map[string]any) (Template, bool) {
	var t Template
	ok := d.unknownFields(entry, field+".", m, templateFields)
	str := func(name string) string {
		v, present := m[name]
		if !present || v == nil {
			return ""
		}
		s, isStr := v.(string)
		if !isStr {
			d.addf(entry, field+"."+name, "must be a string, not %s", jsonType(v))
			ok = false
		}
		return s
	}
	t.Path = str("path")
	t.ID = str("id")
	if v, present := m["dependsOn"]; present && v != nil {
		l, isList := v.([]any)
		if !isList {
			d.addf(entry, field+".dependsOn", "must be a list of template ids, not %s", jsonType(v))
			ok = false
		}
		for k, e := range l {
			s, isStr := e.(string)
			if !isStr {
				d.addf(entry, fmt.Sprintf("%s.dependsOn[%d]", field, k), "must be a template id, not %s", jsonType(e))
				ok = false
				continue
			}
			t.DependsOn = append(t.DependsOn, s)
		}
	}
	if v, present := m["readyWhen"]; present && v != nil {
		l, isList := v.([]any)
		if !isList {
			d.addf(entry, field+".readyWhen", "must be a list of checks, not %s", jsonType(v))
			ok = false
		}
		for k, e := range l {
			c, cok := d.decodeReadyCheck(entry, fmt.Sprintf("%s.readyWhen[%d]", field, k), e)
			ok = ok && cok
			t.ReadyWhen = append(t.ReadyWhen, c)
		}
	}
	return t, ok
}

// decodeReadyCheck reads one check of readyWhen.
func (d *decoder) decodeReadyCheck(entry, field string, v any) (ReadyCheck, bool) {
	var c ReadyCheck
	m, isMap := v.(map[string]any)
	if !isMap {
		d.addf(entry, field, "must be a mapping such as {kind: Service, fieldPath: spec.clusterIP, nonEmpty: true}, not %s", jsonType(v))
		return c, false
	}
	ok := d.unknownFields(entry, field+".", m, readyCheckFields)
	c.Kind, _ = m["kind"].(string)
	c.FieldPath, _ = m["fieldPath"].(string)
	if b, present := m["nonEmpty"]; present {
		nb, isBool := b.(bool)
		if !isBool {
			d.addf(entry, field+".nonEmpty", "must be true or false, not %s", jsonType(b))
			ok = false
		}
		c.NonEmpty = nb
	}
	if e, present := m["equals"]; present && e != nil {
		switch x := e.(type) {
		case string:
			c.Equals = &x
		case bool, json.Number:
			s := fmt.Sprint(x)
			c.Equals = &s
		default:
			d.addf(entry, field+".equals", "must be a string, number or boolean, not %s", jsonType(e))
			ok = false
		}
	}
	if cv, present := m["condition"]; present && cv != nil {
		cm, isMap := cv.(map[string]any)
		typ, _ := cm["type"].(string)
		status, _ := cm["status"].(string)
		if !isMap || typ == "" || (status != "True" && status != "False" && status != "Unknown") {
			d.addf(entry, field+".condition", `must be {type: TYPE, status: "True" | "False" | "Unknown"}`)
			ok = false
		}
		c.Condition = &ConditionCheck{Type: typ, Status: status}
	}
	if c.Kind == "" {
		d.addf(entry, field+".kind", "is required: the kind of this template's children the check applies to")
		ok = false
	}
	n := 0
	for _, set := range []bool{c.NonEmpty, c.Equals != nil, c.Condition != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		d.addf(entry, field, "needs exactly one of nonEmpty: true, equals or condition")
		ok = false
	case c.Condition == nil:
		if _, err := parseFieldPath(c.FieldPath); err != nil {
			d.addf(entry, field+".fieldPath", "%v", err)
			ok = false
		}
	case c.FieldPath != "":
		d.addf(entry, field+".fieldPath", "is not read by a condition check")
		ok = false
	}
	return c, ok
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
