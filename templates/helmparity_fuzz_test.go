package templates

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzChartMatchesHelm renders the anyvalues chart (every value printed
// as Helm prints safely: toYaml in a block, toJson, quote, sha256sum of
// serialised and included text, range and keys over maps) and the parity
// chart with fuzzed values, a YAML document as a tenant could write it
// (anchors and aliases, deep nesting, large and odd numbers, escapes,
// many keys in any order), read as the controller holds a spec (JSON
// numbers), with stencil and with Helm's engine, and holds them equal as
// TestChartMatchesHelm does: the same objects, field for field, the same
// hooks and notes, or both failing.
//
// The differences DESIGN.md makes on purpose are told apart, not
// compared away:
//
//   - stencil may refuse what Helm renders only for its documented
//     reasons (the render budget, a child contract the object breaks);
//   - Helm may fail where stencil renders only with a YAML error: a
//     tenant's text that Helm prints raw as YAML syntax (the parity
//     chart prints a tenant's map keys and global.team raw), which stencil
//     lands as one value;
//   - a tenant's string holding NEL, LINE SEPARATOR or PARAGRAPH SEPARATOR
//     (U+0085, U+2028, U+2029) is kept exactly by stencil where Helm's
//     YAML round trip folds it into a space: only the objects' names are
//     compared then;
//   - with such raw printing in the parity chart, Helm's structure is the
//     tenant's: the parity chart's objects are compared only for values
//     no raw print can read as syntax (plainValues).
func FuzzChartMatchesHelm(f *testing.F) {
	for _, seed := range []string{
		"scalar: x",
		"map: {b: 1, a: 2, c: {z: [1, 2, {y: n}]}}",
		"base: &b {a: 1, b: [x, y]}\nmap: {<<: *b, c: 3}\nlist: [*b, *b]",
		"scalar: 12345678901234567890\nlist: [9007199254740993, -0, 1e-320, 0x1F, 0o17, .inf]",
		"scalar: \"quote \\\" back \\\\ tab \\t nl \\n bell \\a é ✓ \\u2028\"",
		"map: {\"{{ .Release.Name }}\": \"{{ fail \\\"x\\\" }}\", \"#c\": \"&a\", \"- x\": \"? y\", \": z\": \"|\"}",
		"list: [[[[[[[[[[deep]]]]]]]]]]",
		"k0: 0\nk1: 1\nk2: 2\nk3: 3\nk4: 4\nk5: 5\nk6: 6\nk7: 7\nk8: 8\nk9: 9",
		"scalar: null\nmap: null\nlist: []",
		"config: {b: '2', a: '1'}\ngreeting: \"it's \\\"x\\\"\"\nnested: {deep: {list: [a, {b: c}]}}\ndepth: 5",
		"scalar: yes\nmap: {on: off, y: n, \"true\": false}",
		"global: {team: \"x: y\"}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > 4096 {
			return
		}
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			m = map[string]any{"scalar": v, "list": []any{v}}
		}
		spec, ok := jsonSpec(m)
		if !ok {
			return
		}
		for _, c := range []parityCase{
			{chart: anyValuesChart, name: "fuzz"},
			{chart: parityChart, name: "fuzz", tenantTemplates: true},
		} {
			checkMatchesHelm(t, c, spec)
		}
	})
}

// jsonSpec is m as the controller holds a spec (specOf), false when JSON
// cannot hold it (a NaN, an infinity).
func jsonSpec(m map[string]any) (map[string]any, bool) {
	return specOfNoFail(m)
}

// checkMatchesHelm is one fuzz comparison of c (see FuzzChartMatchesHelm).
func checkMatchesHelm(t *testing.T, c parityCase, spec map[string]any) {
	t.Helper()
	got, serr, want, herr, parent := renderBoth(t, c, spec)
	switch {
	case serr != nil && herr != nil:
		return
	case serr != nil:
		if !refusedByDesign(serr) {
			t.Fatalf("%s: stencil fails and helm renders: %v", c.chart, serr)
		}
		return
	case herr != nil:
		if !strings.Contains(herr.Error(), "YAML") || c.chart == anyValuesChart {
			t.Fatalf("%s: helm fails and stencil renders: %v", c.chart, herr)
		}
		return
	}
	if holdsFolded(spec) || c.chart == parityChart && !plainValues(spec) {
		var g, w []string
		for _, u := range got.Children {
			g = append(g, objectKey(u))
		}
		for _, u := range want.objects {
			w = append(w, objectKey(u))
		}
		if strings.Join(g, ",") != strings.Join(w, ",") && c.chart == anyValuesChart {
			t.Fatalf("%s: objects differ:\nstencil: %v\nhelm:    %v", c.chart, g, w)
		}
		return
	}
	compareOutputs(t, got, want, parent)
}

// refusedByDesign reports whether err is one of stencil's documented
// refusals of what Helm renders.
func refusedByDesign(err error) bool {
	msg := err.Error()
	for _, why := range []string{"render budget", "renderBudget", "is invalid", "must live in the resource's namespace",
		"is cluster-scoped", "is not allowed", "placeholder secret"} {
		if strings.Contains(msg, why) {
			return true
		}
	}
	return false
}

// holdsFolded reports whether v holds, in a key or a string, a character
// YAML reads as a line break that Helm's round trip folds (U+0085, U+2028,
// U+2029).
func holdsFolded(v any) bool {
	folded := func(s string) bool { return strings.ContainsAny(s, "\u0085\u2028\u2029") }
	switch v := v.(type) {
	case string:
		return folded(v)
	case map[string]any:
		for k, e := range v {
			if folded(k) || holdsFolded(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsFolded(e) {
				return true
			}
		}
	}
	return false
}

// plainValues reports whether every key and string of v is a word YAML
// reads as itself wherever the parity chart prints it raw (a map key of
// config, global.team, replicas).
func plainValues(v any) bool {
	plain := func(s string) bool {
		if s == "" {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
				return false
			}
		}
		return true
	}
	switch v := v.(type) {
	case string:
		return plain(v)
	case map[string]any:
		for k, e := range v {
			if !plain(k) || !plainValues(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !plainValues(e) {
				return false
			}
		}
	}
	return true
}
