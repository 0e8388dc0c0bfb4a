// Package hostile is the hostile corpus: one custom resource per way a
// tenant's value has turned a plausible template into unbounded work or
// memory (issue 50), for the config in this directory. cmd/stencil's
// TestHostileCorpus renders each through the real binary; the
// render-budget fault scenario applies them to a live controller (go run
// ./test/hostile/gen writes them).
//
// The inputs are built here, not stored: most are hundreds of kilobytes
// of nesting, aliases or repetition that a file would only hide.
package hostile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Case is one hostile resource.
type Case struct {
	// Name is the resource's name, and the attack class.
	Name string
	// Kind is Attack (own templates) or ChartAttack (chart mode).
	Kind string
	// Spec is the resource's spec.
	Spec map[string]any
}

// API versions of the corpus's kinds: Attack (own templates) and
// ChartAttack (chart mode).
const (
	AttackAPIVersion      = "hostile.example.com/v1"
	ChartAttackAPIVersion = "charts.hostile.example.com/v1"
)

// Resource returns the case as a JSON custom resource.
func (c Case) Resource() []byte {
	b, err := json.Marshal(map[string]any{
		"apiVersion": c.APIVersion(), "kind": c.Kind,
		"metadata": map[string]any{"name": c.Name},
		"spec":     c.Spec,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// Disarmed returns the case with the same values, stored the same, that
// renders harmlessly: its templates' keys (attack, and the chart's values)
// renamed with a "disarmed" prefix. A scenario that compares a controller
// with and without the hostile renders holds the same objects both ways.
func (c Case) Disarmed() Case {
	spec := make(map[string]any, len(c.Spec))
	for k, v := range c.Spec {
		spec[disarm(c, k)] = v
	}
	return Case{Name: c.Name, Kind: c.Kind, Spec: spec}
}

// ArmPatch is the JSON merge patch that turns Disarmed into the case.
func (c Case) ArmPatch() []byte {
	spec := map[string]any{}
	for k, v := range c.Spec {
		if d := disarm(c, k); d != k {
			spec[d] = nil
			spec[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		panic(err)
	}
	return b
}

// disarm is the key k of the case's spec when disarmed: attack, and
// every key of a chart's values, which the chart reads.
func disarm(c Case, k string) string {
	if k == "attack" || c.Kind == "ChartAttack" {
		return "disarmed" + strings.ToUpper(k[:1]) + k[1:]
	}
	return k
}

// APIVersion is the case's kind's apiVersion.
func (c Case) APIVersion() string {
	if c.Kind == "ChartAttack" {
		return ChartAttackAPIVersion
	}
	return AttackAPIVersion
}

// Benign returns a resource of kind that renders small: the baseline.
func Benign(name, kind string) Case {
	return Case{Name: name, Kind: kind, Spec: map[string]any{}}
}

// PlatformSecret is what the corpus's chart entry sets in overrideValues,
// at a path its chart never prints.
const PlatformSecret = "HOSTILE-PLATFORM-SECRET-4e1d"

// SecretCases returns one chart resource per way a tenant's text has
// reached tpl and read PlatformSecret (issue 51): the secret must be in no
// object stencil renders. They render (the text lands as text), so they
// are not in Cases, whose resources must fail.
func SecretCases() []Case {
	const read = "{{ .Values.platform.password }}"
	return []Case{
		{Name: "secret-tpl", Kind: "ChartAttack", Spec: map[string]any{"podLabels": map[string]any{"a": read}}},
		{Name: "secret-yaml-escape", Kind: "ChartAttack", Spec: map[string]any{"podLabels": `a: "\x7b\x7b .Values.platform.password }}"`}},
		{Name: "secret-json-escape", Kind: "ChartAttack", Spec: map[string]any{"podLabels": `{"a": "\u007b\u007b .Values.platform.password }}"}`}},
		{Name: "secret-binary", Kind: "ChartAttack", Spec: map[string]any{"podLabels": "a: !!binary " + base64.StdEncoding.EncodeToString([]byte(read))}},
		{Name: "secret-forged-placeholder", Kind: "ChartAttack", Spec: map[string]any{"podLabels": map[string]any{"a": "zzstencilvv00000000z", "b": "zzstencilvq00000001z"}}},
	}
}

// Cases returns one resource per attack class.
func Cases() []Case {
	return []Case{
		// Output that grows faster than its input: toYaml | nindent of a
		// value nested 5,000 maps deep around 100,000 empty strings
		// (about 320 KB of JSON, a gigabyte of YAML), in own templates and
		// in a chart.
		{Name: "to-yaml", Kind: "Attack", Spec: map[string]any{"attack": "toYaml", "affinity": deepMaps(5000, 100_000)}},
		{Name: "to-pretty-json", Kind: "Attack", Spec: map[string]any{"attack": "toPrettyJson", "affinity": deepMaps(5000, 100_000)}},
		{Name: "chart-to-yaml", Kind: "ChartAttack", Spec: map[string]any{"affinity": deepMaps(5000, 100_000)}},
		// YAML aliases: fromYaml of a 220 KB string with one anchored
		// 100 KB value referenced 40,000 times.
		{Name: "alias-bomb", Kind: "Attack", Spec: map[string]any{"attack": "fromYaml", "doc": aliasBomb(100_000, 40_000)}},
		// An anchor in a template (env: &env, *env in every sidecar) with
		// 400 tenant entries in each list.
		{Name: "template-anchors", Kind: "Attack", Spec: map[string]any{"attack": "anchors", "env": envs(400), "sidecars": make([]any, 400)}},
		// Quadratic placing: toJson of 60,000 items beside a block scalar,
		// and a list 9,990 deep.
		{Name: "args-block-scalar", Kind: "Attack", Spec: map[string]any{"attack": "args", "args": items(60_000, "--flag"), "script": "echo hello"}},
		{Name: "deep-list", Kind: "Attack", Spec: map[string]any{"attack": "deepList", "deep": deepList(9990)}},
		// One call, a huge result: join with a tenant's separator, a
		// tenant's printf width over a tenant's list, uniq of a list of
		// lists, a tenant's regular expression.
		{Name: "join-separator", Kind: "Attack", Spec: map[string]any{"attack": "join", "sep": strings.Repeat("s", 20_000), "items": items(20_000, "")}},
		{Name: "printf-width", Kind: "Attack", Spec: map[string]any{"attack": "printf", "width": 2_000_000_000, "items": items(10, "x")}},
		{Name: "uniq-lists", Kind: "Attack", Spec: map[string]any{"attack": "uniq", "lists": lists(20_000)}},
		{Name: "regex", Kind: "Attack", Spec: map[string]any{"attack": "regex", "pattern": "(?:a|b){1000}c", "input": strings.Repeat("a", 1_000_000)}},
		// Chart mode: 40,000 annotation keys (scanning and comparing
		// every tenant string; 1 MB, as much as etcd stores), and
		// randAlphaNum of a tenant's length.
		{Name: "chart-annotations", Kind: "ChartAttack", Spec: map[string]any{"podAnnotations": annotations(40_000)}},
		{Name: "chart-rand-length", Kind: "ChartAttack", Spec: map[string]any{"tokenLength": 2_000_000_000}},
		// stencil render itself: a 40 KB resource whose rows each print a
		// 20 KB value, about 100 MB of output.
		{Name: "output", Kind: "Attack", Spec: map[string]any{"attack": "output", "rows": make([]any, 5000), "pad": strings.Repeat("p", 20_000)}},
	}
}

// deepMaps nests depth maps around a list of width empty strings.
func deepMaps(depth, width int) map[string]any {
	leaf := make([]any, width)
	for i := range width {
		leaf[i] = ""
	}
	v := map[string]any{"a": leaf}
	for range depth - 1 {
		v = map[string]any{"a": v}
	}
	return v
}

// aliasBomb is a YAML document with one anchored value of size bytes and
// refs aliases of it.
func aliasBomb(size, refs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "base: &x %q\nrefs:\n", strings.Repeat("b", size))
	for range refs {
		b.WriteString("- *x\n")
	}
	return b.String()
}

func envs(n int) []any {
	out := make([]any, n)
	for i := range n {
		out[i] = map[string]any{"name": fmt.Sprintf("E%d", i), "value": strings.Repeat("v", 100)}
	}
	return out
}

func items(n int, prefix string) []any {
	out := make([]any, n)
	for i := range n {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func deepList(depth int) any {
	var v any = "bottom"
	for range depth {
		v = []any{v}
	}
	return v
}

func lists(n int) []any {
	out := make([]any, n)
	for i := range n {
		out[i] = []any{fmt.Sprintf("%d", i), "x", "y"}
	}
	return out
}

func annotations(n int) map[string]any {
	out := make(map[string]any, n)
	for i := range n {
		out[fmt.Sprintf("example.com/a%d", i)] = "v"
	}
	return out
}
