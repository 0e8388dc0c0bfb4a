package chart

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"stencil.dev/stencil/gvr"
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
			_, err = c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: tc.spec, Budget: gvr.RenderBudget{}.WithDefaults()})
			took := time.Since(start)
			t.Logf("%v in %s", err, took.Round(time.Millisecond))
			if !errors.Is(err, budget.ErrExceeded) || !strings.Contains(err.Error(), "renderBudget."+tc.bound) {
				t.Fatalf("err = %v, want the render budget's %s", err, tc.bound)
			}
			if !strings.HasPrefix(err.Error(), "probe/templates/cm.yaml:6: ") || len(err.Error()) > 300 {
				t.Errorf("err = %q, want it short and naming the template and line", err)
			}
			if took > 10*time.Second {
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
	obj, err := renderOne(t, dir, map[string]any{"x": `{{ define "in" }}{{ .Release.Name }}{{ end }}{{ include "in" . }}-{{ len (list 1 2) }}`})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, obj)
	if d["a"] != "web-h" || d["b"] != "demo-2" || d["c"] != "WEB" {
		t.Errorf("data = %v", d)
	}
}
