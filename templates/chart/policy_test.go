package chart

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/funcs"
)

// vocabulary is every name a template can call in either mode, with helm
// as Helm's function table: sprig's, Helm's, and stencil's (own templates'
// functions and load-time refusals, chart mode's per-render copies). The
// rewrites' own functions ("__...") are not a template author's.
func vocabulary(helm template.FuncMap) template.FuncMap {
	m := maps.Clone(sprig.TxtFuncMap())
	maps.Copy(m, helm)
	maps.Copy(m, funcs.Hermetic())
	maps.Copy(m, engine.ParseFuncs())
	maps.Copy(m, (&executor{}).perRender())
	maps.DeleteFunc(m, func(name string, _ any) bool { return strings.HasPrefix(name, "__") })
	return m
}

// newPrinter is a printer as an executor makes one.
func newPrinter() *printer {
	st := engine.NewState(budget.Limits(config.RenderBudget{}.WithDefaults()), false)
	return &printer{st: &st, taint: engine.NewTaint(&st)}
}

// Every name of sprig ∪ Helm's table ∪ stencil's is classified by the
// policy table; a name Helm adds that the table does not know fails this
// test, naming it.
func TestEveryFunctionIsClassified(t *testing.T) {
	helm := helmFuncMap()
	for _, name := range funcs.Unclassified(vocabulary(helm)) {
		t.Errorf("%s: a template can call it (sprig's, Helm's or stencil's table), but templates/funcs/policy.go does not classify it", name)
	}
	if len(helm) < 200 {
		t.Errorf("Helm's table has %d functions: the link pulled something else", len(helm))
	}
	// As a Helm upgrade that adds a function would: the check names it.
	fake := helmFuncMap()
	fake["notAHelmFunction"] = func() string { return "raw" }
	if got := funcs.Unclassified(vocabulary(fake)); !slices.Equal(got, []string{"notAHelmFunction"}) {
		t.Errorf("with a fake function in Helm's table, the unclassified names are %v, want [notAHelmFunction]", got)
	}
}

// Chart mode binds every name of Helm's table, and none as Helm's table
// gives it except Helm's own serialisers and parsers, which the rewrite
// frames: a name the policy does not know is refused at run time, naming
// it.
func TestChartModeBindsEveryHelmFunctionByItsClass(t *testing.T) {
	helm := helmFuncMap()
	helm["notAHelmFunction"] = func() string { return "raw" }
	p := newPrinter()
	m := p.funcs(helm, (&executor{}).perRender())
	for name, fn := range helm {
		got, ok := m[name]
		if !ok || got == nil {
			t.Errorf("%s: in Helm's table, not bound in chart mode", name)
			continue
		}
		framed := funcs.Is(name, funcs.HelmOwn) && funcs.Is(name, funcs.Serialiser|funcs.Parser)
		raw := reflect.ValueOf(got).Pointer() == reflect.ValueOf(fn).Pointer()
		if raw != framed {
			t.Errorf("%s: bound as Helm's table gives it: %v, want %v (only Helm's own serialisers and parsers, which the rewrite frames)", name, raw, framed)
		}
	}
	tmpl, err := template.New("t").Funcs(m).Parse(`{{ trunc 2 "abc" }}{{ notAHelmFunction }}`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = tmpl.Execute(&b, nil)
	if err == nil || !strings.Contains(err.Error(), "notAHelmFunction is refused: it is not classified") {
		t.Errorf("a chart calling a function the policy does not know: %q, %v; want it refused, naming it", b.String(), err)
	}
	for _, name := range []string{"env", "expandenv"} {
		helm := template.FuncMap{name: func(string) string { return "the controller's secret" }}
		_, err := p.funcs(helm, nil)[name].(func(...any) (any, error))("HOME")
		if err == nil || !strings.Contains(err.Error(), name+" is refused in chart mode") {
			t.Errorf("%s, were Helm's table to have it again: %v, want it refused", name, err)
		}
	}
}

// Helm's duration helpers, which chart mode bound as they came until the
// table classified them, render as Helm renders them, counted and
// tainted.
func TestHelmDurationsRender(t *testing.T) {
	dir := writeChart(t, "timeout: 2m\n", map[string]string{"templates/cm.yaml": configMap +
		"  seconds: {{ durationSeconds \"1m30s\" | quote }}\n" +
		"  tenant: {{ .Values.timeout | durationSeconds | quote }}\n" +
		"  rounded: {{ durationRoundTo \"1h29m\" \"1h\" | quote }}\n" +
		"  days: {{ durationDays 172800 | quote }}\n"})
	obj, err := renderOne(t, dir, map[string]any{"timeout": "5m"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"seconds": "90", "tenant": "300", "rounded": "1h0m0s", "days": "2"}
	if got := data(t, obj); !reflect.DeepEqual(got, want) {
		t.Errorf("data = %v, want %v", got, want)
	}
}
