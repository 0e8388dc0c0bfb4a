package chart

// The shape check: the safety of a tenant's value, by construction. The
// safe layer (safe.go) finds a tenant's string in what an action prints;
// a chart that transforms the value first (trunc 63 of a nameOverride,
// lower, replace, printf, a quote inside a flow collection) prints text
// the search does not find. Whatever the chart did, a tenant's string
// must not change which fields the objects have. So a render whose spec
// holds a string YAML could read as syntax is rendered once more with
// each such string (and key) replaced by as many bytes of "x", and every
// object must have exactly the field paths it has there; if one differs,
// the render fails naming the object and the field. Benign specs (no such
// string) never pay for the second render.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"stencil.dev/stencil/templates/engine"
)

// ShapeError is a render in which a tenant's value changed the fields of
// an object: it is refused.
type ShapeError struct {
	// Template is the template of the object.
	Template string
	// Path is the first field path that differs, as in the render with
	// the tenant's value ("" when the objects differ in number).
	Path string
}

// Error implements error.
func (e *ShapeError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: a value from the custom resource changes which objects the chart renders; the render is refused", e.Template)
	}
	return fmt.Sprintf("%s: a value from the custom resource changes the object's fields (at %s): the chart prints it, or what it made of it (trunc, printf, replace ...), where YAML reads it as syntax; the render is refused", e.Template, e.Path)
}

// checkShape renders rel again with its hostile strings benign and
// compares the field paths of every object with out's. It returns the
// steps the render has counted, both passes together.
func (c *Chart) checkShape(ctx context.Context, rel Release, clock time.Time, out *Output, hostile []string) (int64, error) {
	if len(hostile) == 0 {
		return out.State.Steps(), nil
	}
	benign := map[string]string{}
	for _, h := range hostile {
		benign[h] = strings.Repeat("x", len(h))
	}
	calm := rel
	calm.Spec, _ = replaceStrings(rel.Spec, benign).(map[string]any)
	calm.spent = out.State.Steps()
	ref, _, err := c.render(ctx, calm, clock)
	if err != nil {
		return 0, fmt.Errorf("checking that the custom resource's values keep the objects' fields, rendering it with them replaced by plain text failed: %w", err)
	}
	spent := ref.State.Steps()
	if len(ref.Manifests) != len(out.Manifests) {
		return 0, &ShapeError{Template: out.Manifests[min(len(out.Manifests), len(ref.Manifests))%max(len(out.Manifests), 1)].Template}
	}
	names := map[string]bool{}
	for h, b := range benign {
		names[h], names[b] = true, true
	}
	for i, m := range out.Manifests {
		got, err := engine.Decode(m.Body, out.State)
		if err != nil {
			return spent, nil // the decode in package templates reports it
		}
		want, err := engine.Decode(ref.Manifests[i].Body, ref.State)
		if err != nil {
			// The tenant's strings made text YAML reads where plain text
			// does not: refused, not let through unchecked.
			return 0, &ShapeError{Template: m.Template}
		}
		g, w := fieldPaths(got, names), fieldPaths(want, names)
		if !slices.Equal(g, w) {
			path := ""
			for _, p := range g {
				if !slices.Contains(w, p) {
					path = p
					break
				}
			}
			if path == "" {
				for _, p := range w {
					if !slices.Contains(g, p) {
						path = p + " (missing)"
						break
					}
				}
			}
			return 0, &ShapeError{Template: m.Template, Path: path}
		}
		if path := flagChanged(got, want, names); path != "" {
			return 0, &ShapeError{Template: m.Template, Path: path}
		}
	}
	return spent, nil
}

// flagChanged returns the path of the first flag whose value differs
// between got and want (the render with plain text), "" when none: a
// boolean, or a list item that reads as a command-line flag ("-..."),
// where neither holds the tenant's text. A tenant's value may change
// values that are made of it; it must not turn the chart's own switch.
func flagChanged(got, want any, names map[string]bool) string {
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if names[k] {
				continue
			}
			if p := flagChanged(g[k], w[k], names); p != "" {
				return "." + k + p
			}
		}
	case []any:
		g, _ := got.([]any)
		for i, e := range w {
			if i >= len(g) {
				return "[" + strconv.Itoa(i) + "]"
			}
			if s, ok := e.(string); ok && strings.HasPrefix(s, "-") && !standIn(s, names) && g[i] != s {
				return "[" + strconv.Itoa(i) + "]"
			}
			if p := flagChanged(g[i], e, names); p != "" {
				return "[" + strconv.Itoa(i) + "]" + p
			}
		}
	case bool:
		if got != w {
			return " (a boolean)"
		}
	}
	return ""
}

// standIn reports whether s holds one of the plain-text stand-ins (or a
// tenant's string).
func standIn(s string, names map[string]bool) bool {
	if strings.Contains(s, "xxxx") {
		return true // a stand-in, or what the chart made of one (trunc)
	}
	for n := range names {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}

// replaceStrings returns v with every string and key that is a key of
// with replaced by its value.
func replaceStrings(v any, with map[string]string) any {
	switch v := v.(type) {
	case string:
		if r, ok := with[v]; ok {
			return r
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if r, ok := with[k]; ok {
				k = r
			}
			out[k] = replaceStrings(e, with)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = replaceStrings(e, with)
		}
		return out
	}
	return v
}

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
