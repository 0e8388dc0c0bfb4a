package templates

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
)

// hostileTemplates are plausible templates that a tenant's number or list
// turns into unbounded work, each with the spec that does it and a benign
// spec that renders as it always did.
var hostileTemplates = []struct {
	name, text      string
	hostile, benign map[string]any
}{
	{"shards", `{{- range $i := until (int .Spec.shards) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shard-{{ $i }}
{{- end }}
`, map[string]any{"shards": int64(300_000_000)}, map[string]any{"shards": int64(3)}},
	{"duplicates", `{{- $dups := 0 }}
{{- range $i, $a := .Spec.hosts }}{{ range $j, $b := $.Spec.hosts }}{{ if and (ne $i $j) (eq $a $b) }}{{ $dups = add1 $dups }}{{ end }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: hosts
data:
  duplicates: "{{ $dups }}"
`, map[string]any{"hosts": hostList(20_000)}, map[string]any{"hosts": hostList(200)}},
	{"width", `apiVersion: v1
kind: ConfigMap
metadata:
  name: banner
data:
  rule: {{ repeat (int .Spec.width) "=" }}
`, map[string]any{"width": int64(2_000_000_000)}, map[string]any{"width": int64(40)}},
}

func hostList(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("host-%d.example.com", i%(n-1))
	}
	return out
}

// renderMeasured renders spec with set and returns the error, the time and
// how far the live heap rose (peakHeap): what a pod's memory limit sees.
func renderMeasured(t *testing.T, set *Set, spec map[string]any) (error, time.Duration, uint64) {
	t.Helper()
	p := parent()
	p.Spec = spec
	var err error
	start := time.Now()
	peak := peakHeap(func() { _, err = set.Render(p) })
	return err, time.Since(start), peak
}

var budgetLocation = regexp.MustCompile(`^[a-z]+\.yaml\.tmpl:\d+: `)

// Each hostile value ends in about a second (under two) and 50 MiB of live heap, with
// an error naming the template, the line and the bound; the benign values
// render without error.
func TestRenderBudgetStopsHostileValues(t *testing.T) {
	for _, tc := range hostileTemplates {
		t.Run(tc.name, func(t *testing.T) {
			set := loadSet(t, Options{AllowedKinds: configMapKinds}, tc.name+".yaml.tmpl", tc.text)
			if err, _, _ := renderMeasured(t, set, tc.benign); err != nil {
				t.Fatalf("benign spec: %v", err)
			}
			err, took, alloc := renderMeasured(t, set, tc.hostile)
			t.Logf("hostile %s: %v in %s, live heap up %.1f MiB", tc.name, err, took.Round(time.Millisecond), float64(alloc)/(1<<20))
			if !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("hostile spec: err = %v, want budget.ErrExceeded", err)
			}
			if !budgetLocation.MatchString(err.Error()) || !strings.Contains(err.Error(), "renderBudget.") {
				t.Errorf("error %q does not name template:line and the bound", err)
			}
			if took > 2*time.Second && !raceEnabled {
				t.Errorf("hostile render took %s, want about a second, under 2s", took)
			}
			if alloc > 50<<20 && !raceEnabled {
				t.Errorf("hostile render's live heap rose %.1f MiB, want under 50", float64(alloc)/(1<<20))
			}
		})
	}
}

// Other shapes of amplification: the property, not the three examples.
func TestRenderBudgetBoundsAmplification(t *testing.T) {
	big := map[string]any{"n": int64(1_000_000_000), "s": "ab", "list": hostList(5_000)}
	for name, text := range map[string]string{
		"untilStep":  `{{ range untilStep 0 (int .Spec.n) 1 }}{{ end }}`,
		"seq":        `{{ seq 1 (int .Spec.n) }}`,
		"indent":     `{{ indent (int .Spec.n) "x" }}`,
		"printf":     `{{ printf "%0*d" (int .Spec.n) 1 }}`,
		"printfLit":  `{{ printf (print "%0" .Spec.n "d") 1 }}`,
		"replace":    `{{ $s := repeat 100000 "a" }}{{ replace "" $s $s }}`,
		"regex":      `{{ $s := repeat 100000 "a" }}{{ regexReplaceAll "" $s $s }}`,
		"doubling":   `{{ $x := list .Spec.s }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ toJson $x }}`,
		"deepCopy":   `{{ $x := list .Spec.s }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ $y := deepCopy $x }}`,
		"append":     `{{ $x := list }}{{ range until (int .Spec.n) }}{{ $x = append $x 1 }}{{ end }}`,
		"recursion":  `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`,
		"include":    `{{ define "i" }}{{ include "i" . }}{{ end }}{{ include "i" . }}`,
		"rangeInt":   `{{ range (int .Spec.n) }}{{ end }}`,
		"splitEmpty": `{{ $s := repeat 1000000 "a" }}{{ splitList "" $s }}`,
		"uniq":       `{{ $l := list }}{{ range until 90000 }}{{ $l = append $l . }}{{ end }}{{ uniq $l }}`,
		"join":       `{{ $s := repeat 1000000 "a" }}{{ $l := list }}{{ range until 1000 }}{{ $l = append $l $s }}{{ end }}{{ join "," $l }}`,
		"nested":     `{{ range .Spec.list }}{{ range $.Spec.list }}{{ end }}{{ end }}`,
	} {
		t.Run(name, func(t *testing.T) {
			set := loadSet(t, Options{AllowedKinds: configMapKinds}, "t.yaml.tmpl", text+"\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
			err, took, alloc := renderMeasured(t, set, big)
			t.Logf("%s: %v in %s, %.1f MiB", name, err, took.Round(time.Millisecond), float64(alloc)/(1<<20))
			if !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("err = %v, want budget.ErrExceeded", err)
			}
			// Timed loosely: a loop of the whole budget is about a second
			// of one core, and the tests share theirs.
			if !raceEnabled && (took > 3*time.Second || alloc > 64<<20) {
				t.Errorf("took %s and %.1f MiB of live heap, want under 3s and 64 MiB", took, float64(alloc)/(1<<20))
			}
		})
	}
}

// An entry raises its budget with renderBudget; a 2,000-item list renders
// far inside the default.
func TestRenderBudgetDefaultsFitRealLists(t *testing.T) {
	set := loadSet(t, Options{AllowedKinds: configMapKinds}, "list.yaml.tmpl", `apiVersion: v1
kind: ConfigMap
metadata:
  name: hosts
data:
{{- range $i, $h := .Spec.hosts }}
  h{{ $i }}: {{ $h | upper | quote }}
{{- end }}
`)
	p := parent()
	p.Spec = map[string]any{"hosts": hostList(2_000)}
	if _, err := set.Render(p); err != nil {
		t.Fatal(err)
	}
	steps := renderSteps(t, set, p)
	t.Logf("a 2,000-item list: %d steps of %d", steps, set.budget.Steps)
	if steps*20 > set.budget.Steps {
		t.Errorf("a 2,000-item list took %d steps, over 5%% of the default %d", steps, set.budget.Steps)
	}
}

// renderSteps renders p and returns the steps it counted.
func renderSteps(t *testing.T, set *Set, p interface{}) int64 {
	t.Helper()
	e, err := set.executor()
	if err != nil {
		t.Fatal(err)
	}
	defer set.release(e)
	for _, name := range set.res.TemplatePaths() {
		if _, err := engine.Execute(e.t, name, p, set.Budget()); err != nil {
			t.Fatal(err)
		}
	}
	return e.st.Steps()
}

var configMapKinds = []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}

// A tenant's long value printed as it is is the tenant's data, bounded by
// the API server and the output bound, not by stringBytes: a 1.5 MiB image
// renders, and etcd refuses the child (the bad-input scenario).
func TestRenderBudgetLeavesPrintedDataToTheOutputBound(t *testing.T) {
	set := loadSet(t, Options{AllowedKinds: configMapKinds}, "big.yaml.tmpl", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  image: {{ .Spec.image | quote }}\n")
	p := parent()
	p.Spec = map[string]any{"image": strings.Repeat("a", 1500000)}
	if _, err := set.Render(p); err != nil {
		t.Fatalf("a 1.5 MiB value: %v", err)
	}
}

// The defaults fit a plausible template: counting the duplicates of a
// tenant's 500 hosts (a loop in a loop, 250,000 turns) renders, and the
// same over 50,000 hosts stops in about a second, naming the bound.
func TestRenderBudgetDefaultsFitDuplicateCount(t *testing.T) {
	var text string
	for _, tc := range hostileTemplates {
		if tc.name == "duplicates" {
			text = tc.text
		}
	}
	set := loadSet(t, Options{AllowedKinds: configMapKinds}, "duplicates.yaml.tmpl", text)
	if raceEnabled {
		// The race detector makes a step ten times slower: the counts,
		// not the clock, are what this test is about.
		set.budget.TimeoutSeconds = 60
	}
	err, took, _ := renderMeasured(t, set, map[string]any{"hosts": hostList(500)})
	if err != nil {
		t.Fatalf("500 hosts: %v", err)
	}
	p := parent()
	p.Spec = map[string]any{"hosts": hostList(500)}
	t.Logf("500 hosts: rendered in %s, %d steps of %d", took.Round(time.Millisecond), renderSteps(t, set, p), set.budget.Steps)
	err, took, _ = renderMeasured(t, set, map[string]any{"hosts": hostList(50_000)})
	t.Logf("50,000 hosts: %v in %s", err, took.Round(time.Millisecond))
	if !errors.Is(err, budget.ErrExceeded) || !strings.Contains(err.Error(), "duplicates.yaml.tmpl:2: ") || !strings.Contains(err.Error(), "renderBudget.steps") {
		t.Fatalf("50,000 hosts: err = %v, want the steps bound named at duplicates.yaml.tmpl:2", err)
	}
	if took > 3*time.Second && !raceEnabled {
		t.Errorf("50,000 hosts took %s to stop, want about a second", took)
	}
}
