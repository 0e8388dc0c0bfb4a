package configtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// aRender is a render of a Service and a Deployment of two replicas, and
// its status.
func aRender() (*rendered, *unstructured.Unstructured) {
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "wren-db", "namespace": "aviary"}, "spec": map[string]any{"clusterIP": "10.0.0.7"}}}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "wren-perch", "namespace": "aviary"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.example/perch:1.9"}}}}}}}
	res := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gen.example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "wren", "namespace": "aviary"}, "spec": map[string]any{"image": "registry.example/perch:1.9"}}}
	st := map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Progressing"}}}
	return &rendered{children: []*unstructured.Unstructured{svc, dep}, status: st}, res
}

// check compiles expr under limit and checks it over aRender.
func check(t *testing.T, expr string, limit uint64) string {
	t.Helper()
	env, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	a, err := compileAssertion(env, Assertion{Expr: expr}, limit)
	if err != nil {
		t.Fatal(err)
	}
	r, res := aRender()
	return a.check(r, res)
}

// TestFailedAssertionSaysWhatItRead: a failure prints the expression,
// what it came to, both sides of a comparison, and the objects it read
// with the values it found; objects read only for their kind or name are
// named on one line.
func TestFailedAssertionSaysWhatItRead(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{"objects.filter(o, o.kind == 'Deployment')[0].spec.replicas == 3", []string{
			"assert objects.filter(o, o.kind == 'Deployment')[0].spec.replicas == 3: got false\n",
			"\n    objects.filter(o, o.kind == \"Deployment\")[0].spec.replicas = 2\n    3 = 3\n",
			"\n    looked at:\n        Deployment aviary/wren-perch: .kind = \"Deployment\", .spec.replicas = 2\n        only the kind or name of: Service aviary/wren-db",
		}},
		{"objects.exists(o, o.kind == 'Deployment' && o.spec.template.spec.containers.all(c, c.image.endsWith(':2.1')))", []string{
			"got false\n    looked at:\n",
			`Deployment aviary/wren-perch: .kind = "Deployment", .spec.template.spec.containers[0].image = "registry.example/perch:1.9"`,
		}},
		{"status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')", []string{
			`status: .conditions[0].type = "Ready", .conditions[0].status = "False"`,
		}},
		{"objects.size() == 3", []string{"objects.size() = 2", "looked at:\n        objects: Service aviary/wren-db, Deployment aviary/wren-perch"}},
		{"objects.exists(o, o.spec.replica == 2)", []string{
			"no such key: replica (has(x.f) tests whether a field is there)",
			"Service aviary/wren-db: .spec.replica = <absent>",
		}},
		{"resource.spec.image != objects[1].spec.template.spec.containers[0].image", []string{
			`resource Gadget aviary/wren: .spec.image = "registry.example/perch:1.9"`,
			`Deployment aviary/wren-perch: .spec.template.spec.containers[0].image = "registry.example/perch:1.9"`,
		}},
	} {
		got := check(t, c.expr, DefaultCostLimit)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the failure lacks %q:\n%s", c.expr, w, got)
			}
		}
	}
	if got := check(t, "objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == 2)", DefaultCostLimit); got != "" {
		t.Errorf("a passing assertion failed: %s", got)
	}
}

// loop is an assertion of 10^9 steps: three comprehensions deep over a
// list of a thousand.
func loop() string {
	nums := make([]string, 1000)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	return l + ".all(i, " + l + ".all(j, " + l + ".all(k, i + j + k >= 0)))"
}

// TestAssertionCostLimit: an assertion of 10^9 steps fails at its cost
// limit within a second or two, naming itself and the limit; a realistic
// one runs far under the default.
func TestAssertionCostLimit(t *testing.T) {
	start := time.Now()
	got := check(t, loop(), DefaultCostLimit)
	took := time.Since(start)
	t.Logf("a 10^9-step assertion failed in %s", took.Round(time.Millisecond))
	if !strings.Contains(got, "assert [0,1,2,") || !strings.Contains(got, "stopped at its cost limit of 1000000 (the case's or file's costLimit raises it") {
		t.Errorf("the failure: %.300s", got)
	}
	if took > 2*time.Second && !raceEnabled {
		t.Errorf("it took %s, want under 2s", took)
	}
	if got := check(t, "objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == 2)", 3); !strings.Contains(got, "stopped at its cost limit of 3") {
		t.Errorf("under a limit of 3: %q", got)
	}
}

// TestCostLimitOverrides: a case's costLimit wins over its file's, which
// wins over DefaultCostLimit; a limit under 1 is an invalid test file.
func TestCostLimitOverrides(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "a.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const res = "{apiVersion: v1, kind: X, metadata: {name: x}}"
	f, err := Load(write("costLimit: 5000\ncases:\n  - {name: file, resource: "+res+", assert: [\"true\"]}\n  - {name: case, costLimit: 7, resource: "+res+", assert: [\"true\"]}\n"), filepath.Join(dir, "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	progs, err := compileAssertions([]*File{f})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := progs[f.Cases[0]][0].limit, progs[f.Cases[1]][0].limit; a != 5000 || b != 7 {
		t.Errorf("limits %d and %d, want 5000 (the file's) and 7 (the case's)", a, b)
	}
	f, err = Load(write("cases:\n  - {name: default, resource: "+res+", assert: [\"true\"]}\n"), filepath.Join(dir, "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if progs, err = compileAssertions([]*File{f}); err != nil || progs[f.Cases[0]][0].limit != DefaultCostLimit {
		t.Errorf("no costLimit: %v, want DefaultCostLimit", err)
	}
	for text, want := range map[string]string{
		"costLimit: 0\ncases:\n  - {name: a, resource: " + res + ", assert: [\"true\"]}\n":  "a.yaml: costLimit: is 0, want at least 1",
		"cases:\n  - {name: a, costLimit: -5, resource: " + res + ", assert: [\"true\"]}\n": "a.yaml: cases[0] (a).costLimit: is -5, want at least 1",
	} {
		if _, err := Load(write(text), filepath.Join(dir, "stencil.yaml")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: %v, want %q", err, want)
		}
	}
}
