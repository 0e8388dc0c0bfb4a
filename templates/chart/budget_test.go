package chart

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// Chart mode runs under the same budget as stencil's own templates: text
// that tpl evaluates (also tpl inside tpl), Helm's own serialisers and
// parsers, and the bytes printed, which Helm writes into buffers of its
// own. Before, each of these ran outside the meter: for minutes, or until
// the process ran out of memory.
func TestChartRendersUnderTheBudget(t *testing.T) {
	const apis = "{{ range $.Capabilities.APIVersions }}"
	for _, tc := range []struct {
		name, template string
		spec           map[string]any
		bound          string
	}{
		{"tpl loops", "  x: {{ tpl .Values.x . | quote }}\n",
			map[string]any{"x": apis + apis + apis + apis + "x{{ end }}{{ end }}{{ end }}{{ end }}"}, "steps"},
		{"tpl runs itself", "  x: {{ tpl .Values.x . | quote }}\n",
			map[string]any{"x": "{{ tpl .Values.x . }}"}, "includeDepth"},
		{"toYaml doubling", "  x: {{ $l := list .Values.x }}{{ range until 40 }}{{ $l = fromYaml (toYaml (dict \"a\" $l \"b\" $l)) | list }}{{ end }}{{ len $l }}\n",
			map[string]any{"x": "abc"}, ""},
		{"fromYaml in a loop", "  x: {{ range until 10000 }}{{ $_ := fromYaml $.Values.x }}{{ end }}\n",
			map[string]any{"x": "a: " + strings.Repeat("b", 1<<20)}, "steps"},
		{"literal output", "{{ range until 100000 }}  # " + strings.Repeat("x", 1000) + "\n{{ end }}",
			map[string]any{}, "stringBytes"},
		{"printed output", "{{ range until 100000 }}  k{{ . }}: {{ $.Values.x }}\n{{ end }}",
			map[string]any{"x": strings.Repeat("y", 1000)}, "stringBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeChart(t, "x: ''\n", map[string]string{"templates/cm.yaml": configMap + tc.template})
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// tenantTemplates: the tenant's text runs, under the budget.
			_, err = c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: tc.spec, Budget: budget.Limits(config.RenderBudget{}.WithDefaults()), TenantTemplates: true})
			took := time.Since(start)
			t.Logf("%v in %s", err, took.Round(time.Millisecond))
			// Under the race detector a step is ten times slower, and the
			// clock may stop a render the counts would have stopped.
			timedOut := tc.bound == "steps" && strings.Contains(err.Error(), "renderBudget.timeoutSeconds")
			if !errors.Is(err, budget.ErrExceeded) || !strings.Contains(err.Error(), "renderBudget."+tc.bound) && !timedOut {
				t.Fatalf("err = %v, want the render budget's %s", err, tc.bound)
			}
			if !strings.HasPrefix(err.Error(), "probe/templates/cm.yaml:6: ") || len(err.Error()) > 300 {
				t.Errorf("err = %q, want it short and naming the template and line", err)
			}
			if took > 10*time.Second && !raceEnabled {
				t.Errorf("took %s", took)
			}
		})
	}
}

// tpl text keeps working as in Helm: defines inside it, include of the
// chart's templates, nested tpl, values printed as they are.
func TestTplUnderTheBudgetKeepsHelmSemantics(t *testing.T) {
	dir := writeChart(t, "name: web\nx: ''\n", map[string]string{
		"templates/_h.tpl": `{{ define "h.name" }}{{ .Values.name }}-h{{ end }}`,
		"templates/cm.yaml": configMap +
			"  a: {{ tpl \"{{ include \\\"h.name\\\" . }}\" . }}\n" +
			"  b: {{ tpl .Values.x . }}\n" +
			"  c: {{ tpl \"{{ tpl \\\"{{ .Values.name }}\\\" . }}\" . | upper }}\n",
	})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Budget: budget.Limits(config.RenderBudget{}.WithDefaults()), TenantTemplates: true,
		Spec: map[string]any{"x": `{{ define "in" }}{{ .Release.Name }}{{ end }}{{ include "in" . }}-{{ len (list 1 2) }}`}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := out.Manifests[0].Object, out.Manifests[0].Err
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, v.(map[string]any))
	if d["a"] != "web-h" || d["b"] != "demo-2" || d["c"] != "WEB" {
		t.Errorf("data = %v", d)
	}
}

// FuzzChartBudget renders the vendored public charts (bitnami nginx with
// common, helm create's chart, podinfo) with fuzzed values: numbers at the
// integer edges, long strings and lists, and template text in the values
// bitnami runs through tpl (common.tplvalues.render). Each render ends
// within the budget's time, or fails; never a panic, never a hang. make
// fuzz runs it with the default budget; the seeds run in make test.
func FuzzChartBudget(f *testing.F) {
	apis := "{{ range $.Capabilities.APIVersions }}"
	for _, seed := range []struct {
		s string
		n int64
		k uint16
	}{
		{"x", 1, 1},
		{apis + apis + apis + "x{{ end }}{{ end }}{{ end }}", 2, 3},
		{"{{ tpl (toYaml .Values.commonAnnotations) . }}", 1, 1},
		{"{{ include \"common.names.fullname\" . }}\n  evil: x", -1, 10},
		{strings.Repeat("a", 1000), math.MinInt64, 2000},
		{"{{ $x := list 1 }}{{ range until 30 }}{{ $x = list $x $x }}{{ end }}{{ toYaml $x }}", math.MaxInt64, 50},
		{"{{ repeat 100000000 \"x\" }}", 1 << 62, 0},
	} {
		f.Add(seed.s, seed.n, seed.k)
	}
	charts := vendoredCharts(f)
	limits := budget.Limits(config.RenderBudget{}.WithDefaults())
	if os.Getenv("STENCIL_FUZZ_BUDGET") != "default" {
		limits.Steps, limits.TimeoutSeconds = limits.Steps/10, 1
	}
	f.Fuzz(func(t *testing.T, s string, n int64, k uint16) {
		list := make([]any, int(k)%3000)
		for i := range list {
			list[i] = s
		}
		specs := map[string]map[string]any{
			"nginx": {"commonAnnotations": map[string]any{"a": s}, "commonLabels": map[string]any{"l": s}, "podLabels": map[string]any{"p": s},
				"extraDeploy": []any{s}, "replicaCount": n, "nameOverride": s, "command": list, "args": list,
				"containerPorts": map[string]any{"http": n}, "service": map[string]any{"ports": map[string]any{"http": n}}},
			"mychart": {"nameOverride": s, "fullnameOverride": s, "replicaCount": n, "podAnnotations": map[string]any{"a": s},
				"ingress": map[string]any{"enabled": true, "hosts": []any{map[string]any{"host": s, "paths": []any{map[string]any{"path": s, "pathType": "Prefix"}}}}},
				"service": map[string]any{"port": n}, "imagePullSecrets": list},
			"podinfo": {"replicaCount": n, "ui": map[string]any{"message": s}, "podAnnotations": map[string]any{"a": s}, "extraArgs": list},
		}
		for name, c := range charts {
			start := time.Now()
			_, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: specs[name], Budget: limits, TenantTemplates: k%2 == 0})
			took := time.Since(start)
			// Chart.Render renders twice when a random function is called.
			if took > 2*time.Duration(limits.TimeoutSeconds)*time.Second+5*time.Second {
				t.Fatalf("%s: render took %s: %v", name, took, err)
			}
			if err != nil && strings.Contains(err.Error(), "panicked") {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})
}

// FuzzChartShape sets string values of the vendored public charts to
// fuzzed text (any length up to 300, any YAML indicator), and checks,
// independently of the render, that every object has
// the field paths of a render with plain x's of the same lengths: a
// tenant's value lands as one value, or the render is refused.
func FuzzChartShape(f *testing.F) {
	for _, s := range []string{"x", "a\nb: c", "n\nevil: yes" + strings.Repeat("z", 60), "x', --evil, 'y", "{{ .Release.Name }}", "- a", "&a *a", "# c", "[a, b]", "\"q\"", strings.Repeat("é", 40) + "\n k: v"} {
		f.Add(s, s)
	}
	charts := vendoredCharts(f)
	specs := func(a, b string) map[string]map[string]any {
		return map[string]map[string]any{
			"nginx": {"tls": map[string]any{"enabled": false}, "nameOverride": a, "commonAnnotations": map[string]any{"a": b},
				"commonLabels": map[string]any{"l": a}, "podLabels": map[string]any{"p": b}, "image": map[string]any{"tag": b}},
			"mychart": {"nameOverride": a, "fullnameOverride": b, "podAnnotations": map[string]any{"a": a}, "image": map[string]any{"tag": b}},
			"podinfo": {"ui": map[string]any{"message": a, "color": b}, "podAnnotations": map[string]any{"a": a}, "image": map[string]any{"tag": b}},
		}
	}
	limits := budget.Limits(config.RenderBudget{}.WithDefaults())
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 300 || len(b) > 300 || !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		hostile, plain := specs(a, b), specs(strings.Repeat("x", len(a)), strings.Repeat("x", len(b)))
		for name, c := range charts {
			out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: hostile[name], Budget: limits})
			if err != nil {
				continue // refused: nothing applied
			}
			ref, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: plain[name], Budget: limits})
			if err != nil {
				continue // the lengths alone fail the chart (a name over 63)
			}
			if len(out.Manifests) != len(ref.Manifests) {
				t.Fatalf("%s: %d objects with %q, %q; %d with x's", name, len(out.Manifests), a, b, len(ref.Manifests))
			}
			for i, m := range out.Manifests {
				got, gerr := m.Object, m.Err
				want, werr := ref.Manifests[i].Object, ref.Manifests[i].Err
				if gerr != nil || werr != nil {
					continue
				}
				if g, w := fieldPaths(got, nil), fieldPaths(want, nil); !slices.Equal(g, w) {
					t.Fatalf("%s: %s with %q, %q has fields\n%v\nwith x's\n%v", name, m.Template, a, b, g, w)
				}
			}
		}
	})
}
