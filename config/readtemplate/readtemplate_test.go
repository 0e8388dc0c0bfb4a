package readtemplate

import (
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReadTemplatesAreBounded: a computed read name runs in the controller,
// outside the render wall, so Parse takes only templates whose
// cost is linear in the resource: loops, template calls and padding are
// refused at load, naming what was refused; what it takes, run over a
// tenant's spec of 1 MiB (wide, and deep), allocates at most a small
// multiple of the spec and ends at once.
func TestReadTemplatesAreBounded(t *testing.T) {
	for _, text := range []string{
		`{{ range .Spec.items }}x{{ end }}`,
		`{{ range .Spec.a }}{{ range .Spec.a }}{{ . }}{{ end }}{{ end }}`,
		`{{ printf "%0*d" .Spec.width 0 }}`,
		`{{ define "x" }}{{ template "x" . }}{{ end }}{{ template "x" . }}`,
		`{{ template "y" . }}`,
		`{{ html .Spec.name }}`,
		`{{ call .Spec.f }}`,
		`{{ if .Spec.a }}{{ range .Spec.b }}{{ end }}{{ end }}`,
		`{{ with .Spec.a }}{{ else }}{{ range .Spec.b }}{{ end }}{{ end }}`,
	} {
		if _, err := Parse("reads[0].objectName", text); err == nil {
			t.Errorf("%s: taken, want refused", text)
		} else if !strings.Contains(err.Error(), "field references, if, with and") {
			t.Errorf("%s: the error does not say what a computed name may hold: %v", text, err)
		}
	}
	wide := map[string]any{}
	for i := range 20_000 {
		wide[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("x", i%7)+itoa(i)] = strings.Repeat("v", 40)
	}
	deep := map[string]any{}
	cur := deep
	for range 10_000 {
		next := map[string]any{}
		cur["n"] = next
		cur = next
	}
	for _, text := range []string{
		`{{ .Spec.passwordSecret }}`,
		`{{ .Name }}-{{ index .Spec "tier" }}`,
		`{{ if eq .Spec.tier "gold" }}gold{{ else }}{{ print .Spec }}{{ end }}`,
		`{{ with .Spec.n }}{{ print . . . }}{{ end }}`,
		`{{ $s := .Spec }}{{ print $s $s $s $s }}{{ len $s }}`,
	} {
		tpl, err := Parse("reads[0].objectName", text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		for name, spec := range map[string]map[string]any{"wide": wide, "deep": deep} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_ = tpl.Execute(io.Discard, map[string]any{"Name": "a", "Spec": spec})
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s over the %s spec: %d KiB allocated in %v", text, name, alloc>>10, took.Round(time.Millisecond))
			// The spec prints in about 1 MiB; four prints of it, each
			// into a buffer that grows by doubling, stay under 64 MiB.
			if alloc > 64<<20 || took > 5*time.Second {
				t.Errorf("%s over the %s spec: %d MiB allocated in %v", text, name, alloc>>20, took)
			}
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
