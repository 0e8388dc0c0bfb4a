package funcs

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// liveNames are stencil's functions that package templates binds per
// executor (live.go, reads.go), above this package: listed here so that
// the table is held to them.
var liveNames = []string{"observed", "ready", "read"}

// vocabulary is every name a template can call in own templates and
// chart mode that this package sees: sprig's, stencil's, and extra (a
// test's stand-in for another table).
func vocabulary(extra template.FuncMap) template.FuncMap {
	m := maps.Clone(sprig.TxtFuncMap())
	maps.Copy(m, Hermetic())
	for _, name := range liveNames {
		m[name] = nil
	}
	maps.Copy(m, extra)
	return m
}

// Every function of sprig's table and stencil's is classified; a name
// the table does not know is named by the check. (chart's
// TestEveryFunctionIsClassified adds Helm's table.)
func TestEveryFunctionIsClassified(t *testing.T) {
	for _, name := range Unclassified(vocabulary(nil)) {
		t.Errorf("%s: a template can call it, but templates/funcs/policy.go does not classify it", name)
	}
	fake := template.FuncMap{"notASprigFunction": func() string { return "raw" }}
	if got := Unclassified(vocabulary(fake)); !slices.Equal(got, []string{"notASprigFunction"}) {
		t.Errorf("with a fake function added, Unclassified = %v, want [notASprigFunction]", got)
	}
}

// A function the table does not know is bound to a refusal, not as it
// comes: a template that calls it parses and fails naming it.
func TestUnclassifiedIsRefused(t *testing.T) {
	raw := func() string { return "raw" }
	m := refuseUnclassified(template.FuncMap{"notASprigFunction": raw, "trunc": sprig.TxtFuncMap()["trunc"]})
	tmpl, err := template.New("t").Funcs(m).Parse(`{{ trunc 2 "abc" }} {{ notASprigFunction }}`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = tmpl.Execute(&b, nil)
	if err == nil || !strings.Contains(err.Error(), "notASprigFunction is refused: it is not classified") {
		t.Errorf("calling an unclassified function: %q, %v; want it refused, naming it", b.String(), err)
	}
	if b.String() != "ab " {
		t.Errorf("printed %q before the refusal, want %q", b.String(), "ab ")
	}
}

// Each entry says what it is, and the classes a mode binds by agree: a
// pure function is nothing else, and each of Helm's own is bound one way
// (framed, counted and tainted, or a copy per render).
func TestEveryEntryHasAClass(t *testing.T) {
	for name, e := range policy {
		c := e.class
		if c == 0 {
			t.Errorf("%s has no class", name)
		}
		if c&Pure != 0 && c&^(Pure|HelmOwn|Stencil) != 0 {
			t.Errorf("%s is Pure and %b: a pure function is nothing else", name, c&^(Pure|HelmOwn|Stencil))
		}
		if c&(PerRender|RendersText) != 0 && c&HelmOwn == 0 {
			t.Errorf("%s is PerRender or RendersText but not HelmOwn", name)
		}
		if c&HelmOwn != 0 {
			ways := 0
			for _, way := range []Class{Serialiser | Parser, Pure, PerRender} {
				if c&way != 0 {
					ways++
				}
			}
			if ways != 1 {
				t.Errorf("%s is Helm's own, bound %d ways (framed serialiser or parser, pure, per render): want exactly 1", name, ways)
			}
		}
		if c&(WritesYAML|WritesJSON) != 0 && c&Serialiser == 0 {
			t.Errorf("%s writes YAML or JSON but is not a Serialiser", name)
		}
	}
}

// What the table calls a builtin is one of text/template's: it parses
// with no functions bound.
func TestBuiltinsAreTextTemplates(t *testing.T) {
	for _, name := range Named(Builtin) {
		if _, err := template.New("t").Parse("{{ " + name + " }}"); err != nil && strings.Contains(err.Error(), "not defined") {
			t.Errorf("%s is classed Builtin, but text/template has no such builtin: %v", name, err)
		}
	}
}
