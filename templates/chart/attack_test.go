package chart

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// Issue 51's classes of attack, each with inputs of its own: each test
// failed on the code before the safety core's change it names.

// leaves calls f with every string of v, keys included, and its path.
func leaves(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case map[string]any:
		for k, e := range v {
			f(path+"."+k+" (key)", k)
			leaves(e, path+"."+k, f)
		}
	case []any:
		for i, e := range v {
			leaves(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

// A tenant string shaped like a placeholder is text: placeholders carry a
// secret drawn per render. Before, "zzstencilvv00000000z" in a spec was
// resolved to the first placed value: the platform's password.
func TestForgedPlaceholderIsText(t *testing.T) {
	dir := writeChart(t, "db: {}\nname: web\n", map[string]string{"templates/cm.yaml": configMap +
		"  url: {{ printf \"postgres://%s:%s@db\" .Values.user .Values.db.password | quote }}\n  name: {{ .Values.name }}\n" +
		"  copy: \"db/{{ .Values.name }}\"\n  other: {{ .Values.other }}\n"})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const password = "s3cr3t-w0rd"
	for _, forged := range []string{"zzstencilvv00000000z", "zzstencilvv00000001z", "zzstencilaaaaaaaaaaaaaaaav00000000z", "zzstencilvq00000000z"} {
		// A user with a '#' makes the url a placed value, which the forged
		// placeholder named.
		spec := map[string]any{"user": "app#1", "name": forged, "other": "x: " + forged}
		out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec,
			Overrides: map[string]string{"db.password": password}, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
		if err != nil {
			t.Fatalf("%s: %v", forged, err)
		}
		v, err := out.Manifests[0].Object, out.Manifests[0].Err
		if err != nil {
			t.Fatal(err)
		}
		d := data(t, v.(map[string]any))
		leaves(d, "data", func(path, s string) {
			if strings.Contains(s, "w0rd") && path != "data.url" {
				t.Errorf("%s: the platform's password reached %s: %q", forged, path, s)
			}
		})
		if d["name"] != forged || d["copy"] != "db/"+forged || d["other"] != "x: "+forged || d["url"] != "postgres://app#1:"+password+"@db" {
			t.Errorf("%s: data %q, want the tenant's text as written", forged, d)
		}
	}
}

// renderAll renders c for spec with the platform's overrides and returns
// every object.
func renderAll(t *testing.T, c *Chart, spec map[string]any, overrides map[string]string) ([]map[string]any, error) {
	t.Helper()
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Overrides: overrides,
		Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
	if err != nil {
		return nil, err
	}
	var objs []map[string]any
	for _, m := range out.Manifests {
		v, err := m.Object, m.Err
		if err != nil {
			return nil, err
		}
		if obj, ok := v.(map[string]any); ok {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// A tenant's text reaches tpl as text however it was decoded on the way.
// Unmodified bitnami nginx: podLabels given as a string is merged through
// fromYaml (which decodes the escapes of a double-quoted scalar into
// "{{") and handed to tpl by common.labels.standard. Before, the pod
// carried the platform's TLS key in a label; the "{{" mask was applied to
// the text as typed. Now every string the tenant gave, and all a function
// or parser makes of it, is tainted, and tpl prints tainted text.
func TestDecodedEscapeDoesNotReachTpl(t *testing.T) {
	c, err := Load("testdata/charts/nginx")
	if err != nil {
		t.Fatal(err)
	}
	const key = "PLATFORM-TLS-KEY-0123"
	overrides := map[string]string{"tls.key": key}
	for _, labels := range []string{
		`a: "\x7b\x7b .Values.tls.key }}"`,
		`a: "\u007b\u007b .Values.tls.key }}"`,
		`a: "\U0000007b\U0000007b .Values.tls.key }}"`,
		`{"a": "\u007b\u007b .Values.tls.key }}"}`,
		`a: !!binary e3sgLlZhbHVlcy50bHMua2V5IH19`,
		`a: "{\x7b .Values.tls.key }}"`,
	} {
		spec := map[string]any{"podLabels": labels, "tls": map[string]any{"enabled": false}}
		out, _, err := c.render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Overrides: overrides,
			Budget: budget.Limits(config.RenderBudget{}.WithDefaults())}, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", labels, err)
		}
		var objs []map[string]any
		for _, m := range out.Manifests {
			v, err := m.Object, m.Err
			if err != nil {
				t.Fatalf("%s: %v", labels, err)
			}
			objs = append(objs, v.(map[string]any))
		}
		for _, obj := range objs {
			leaves(obj, obj["kind"].(string), func(path, s string) {
				if strings.Contains(s, key) {
					t.Errorf("%s: the platform's TLS key reached %s", labels, path)
				}
			})
		}
	}
}

// A quote and a comment in a flow list: toJson's output between squote's
// quotes, where a tenant's quote closed the scalar and its comment
// dropped the chart's own next item (the field paths stayed the same, so
// the shape check passed). Serialisers now write each tenant string as
// a placeholder, so the data is the chart's structure whatever a string
// holds: the chart's flag keeps its value.
func TestQuoteAndCommentKeepTheFlowList(t *testing.T) {
	dir := writeChart(t, "config: {}\nlevel: restricted\n", map[string]string{"templates/cm.yaml": configMap +
		"  args: [--config, {{ toJson .Values.config | squote }}, --enable-debug-endpoints=false]\n" +
		"  flow: {config: {{ toJson .Values.config | squote }}, enforce: restricted}\n"})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"', --enable-debug-endpoints=true] #", "'}, enforce: privileged} #", "x'' , --y"} {
		out, _, err := c.render(context.Background(), Release{Name: "demo", Namespace: "team-a", Budget: budget.Limits(config.RenderBudget{}.WithDefaults()),
			Spec: map[string]any{"config": map[string]any{"a": v}}}, time.Now())
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		obj, err := out.Manifests[0].Object, out.Manifests[0].Err
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		d := data(t, obj.(map[string]any))
		args, _ := d["args"].([]any)
		want := fmt.Sprintf(`{"a":%q}`, v)
		if len(args) != 3 || args[2] != "--enable-debug-endpoints=false" || args[1] != want {
			t.Errorf("%q: args %q, want [--config %s --enable-debug-endpoints=false]", v, args, want)
		}
		if flow, _ := d["flow"].(map[string]any); flow["enforce"] != "restricted" || flow["config"] != want {
			t.Errorf("%q: flow %q, want enforce: restricted", v, flow)
		}
	}
}

// One render, one budget: a render that calls a random function is
// rendered a second time to see whether what it returned reaches an
// object; that second pass once had a fresh budget, so a tenant got twice
// the steps the entry allows. Now it goes on from the steps the first
// counted.
func TestSecondPassSharesTheBudget(t *testing.T) {
	dir := writeChart(t, "items: []\n", map[string]string{
		"templates/cm.yaml": configMap + "{{- range $i, $e := .Values.items }}\n  k{{ $i }}: {{ $e | upper | lower | quote }}\n{{- end }}\n",
		// A test pod named at random, as podinfo's: checked, not applied.
		"templates/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t-{{ randAlphaNum 5 | lower }}\n  annotations: {helm.sh/hook: test}\nspec: {containers: [{name: t, image: busybox}]}\n"})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 2000)
	for i := range items {
		items[i] = "item"
	}
	rel := Release{Name: "demo", Namespace: "team-a", Budget: budget.Limits(config.RenderBudget{}.WithDefaults()), Spec: map[string]any{"items": items}}
	one, _, err := c.render(context.Background(), rel, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	used := one.Steps
	rel.Budget.Steps = used * 3 / 2
	_, err = c.Render(context.Background(), rel)
	if !errors.Is(err, budget.ErrExceeded) {
		t.Errorf("a budget of 1.5x one pass (%d steps) for two passes: err = %v, want the budget exceeded", rel.Budget.Steps, err)
	}
	t.Logf("one pass: %d steps; two under %d: %v", used, rel.Budget.Steps, err)
}

// A spec never pays for a second render: the render's steps are one
// pass's, whatever its strings hold (there is no shape check's second
// render any more, see TestHostileValuesKeepFieldPaths). podinfo is left
// out: its test hooks call randAlphaNum, which is checked by a second
// render whatever the spec.
func TestBenignSpecRendersOnce(t *testing.T) {
	for name, spec := range map[string]map[string]any{
		"nginx":   {"tls": map[string]any{"enabled": false}, "commonAnnotations": map[string]any{"team": "web-1"}, "image": map[string]any{"tag": "1.27.1"}},
		"mychart": {"nameOverride": "shop", "podAnnotations": map[string]any{"team": "web, a: b\n# c"}, "replicaCount": int64(2)},
	} {
		c, err := Load(filepath.Join("testdata", "charts", name))
		if err != nil {
			t.Fatal(err)
		}
		rel := Release{Name: "demo", Namespace: "team-a", Spec: spec, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())}
		one, _, err := c.render(context.Background(), rel, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Render(context.Background(), rel)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := out.Steps, one.Steps; got != want {
			t.Errorf("%s: a benign spec's render counted %d steps, one pass %d: it paid for a second render", name, got, want)
		}
	}
}
