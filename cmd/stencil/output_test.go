package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestWriteYAMLPrintsAsMarshal checks that the streamed encoder prints
// what sigs.k8s.io/yaml's Marshal printed before it, byte for byte: the
// values YAML would read otherwise (yes, 012, ""), block text, integers
// past float64's precision, empty maps and lists, nested lists, Unicode
// and long lines.
func TestWriteYAMLPrintsAsMarshal(t *testing.T) {
	objs := []any{
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"},
			"data": map[string]any{"multi": "line one\nline two\n", "yes": "yes", "octal": "012", "empty": "", "colon": "a: b", "null": "null"}},
		map[string]any{"list": []any{[]any{int64(1), 2.5, true, nil}, map[string]any{}, []any{}, []any{[]any{[]any{"x", "y"}}}},
			"big": int64(1)<<53 + 1, "unicode": "é ü 🙂", "long": strings.Repeat("word ", 40), "tab": "a\tb"},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d"},
			"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "args": []any{"--x=1", "-"}}}}}}}},
	}
	var got bytes.Buffer
	if err := writeYAML(&documents{w: &got}, objs, unbounded); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(b))
	}
	if w := strings.Join(want, "---\n"); got.String() != w {
		t.Errorf("writeYAML printed\n%s\nyaml.Marshal\n%s", got.String(), w)
	}
}

// TestWriteYAMLRefusesPastTheBound checks the bound on what one call
// prints: documents that fit it exactly print; one object more is
// refused, named, and nothing of the call is printed.
func TestWriteYAMLRefusesPastTheBound(t *testing.T) {
	cm := func(name string, n int) *unstructured.Unstructured {
		data := map[string]any{}
		for i := range n {
			data[fmt.Sprintf("k%d", i)] = "v"
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "data": data}}
	}
	a, b := cm("a", 10), cm("b", 1000)
	first, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	bound := int64(len(first))
	var out bytes.Buffer
	d := &documents{w: &out}
	if err := writeYAML(d, []*unstructured.Unstructured{a}, bound); err != nil || out.String() != string(first) {
		t.Fatalf("an object exactly at the bound: %v, printed %d bytes, want %d", err, out.Len(), bound)
	}
	out.Reset()
	d = &documents{w: &out}
	err = writeYAML(d, []*unstructured.Unstructured{a, b}, bound+100)
	var over *overBoundError
	if !errors.As(err, &over) || over.Object != "ConfigMap ns/b" || over.Bound != bound+100 {
		t.Fatalf("got %v, want ConfigMap ns/b refused at %d bytes", err, bound+100)
	}
	if !strings.Contains(err.Error(), "ConfigMap ns/b") || !strings.Contains(err.Error(), strconv.FormatInt(bound+100, 10)) {
		t.Errorf("the message names neither the object nor the bound: %v", err)
	}
	if out.Len() != 0 || d.wrote {
		t.Errorf("printed %d bytes of a refused call:\n%s", out.Len(), out.String())
	}
}

// deepListSpec is a list depth deep whose innermost list holds items
// strings, as JSON: at 9,990 and 5,000, 40 KB of spec that prints as 95
// MB of YAML, each item indented once per level.
func deepListSpec(depth, items int) string {
	inner := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, items), ",") + "]"
	return strings.Repeat("[", depth-1) + inner + strings.Repeat("]", depth-1)
}

// treeBound is what the whole process tree of stencil render (it and its
// render worker) may hold resident at once.
const treeBound = 512 << 20

// TestRenderOfADeepListIsBounded runs stencil render (this binary, as its
// own process, with its render worker) on a list 9,990 deep holding
// 5,000 items, with own templates and in chart mode: it is refused,
// naming the object and the bound, printing nothing, and the process tree
// stays under 512 MiB resident (before the bound, it printed 95 MB, and
// its tree held over 500 MiB). The same list holding 500 items prints
// within the bound.
func TestRenderOfADeepListIsBounded(t *testing.T) {
	if args := os.Getenv("STENCIL_RENDER_CHILD"); args != "" {
		os.Exit(dispatch(strings.Split(args, "\n"), os.Stdin, os.Stdout, os.Stderr))
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "stencil.yaml"), `resources:
  - group: deep.example.com
    version: v1
    resource: deeps
    templates: [deep.yaml.tmpl]
    children:
      - {apiVersion: apps/v1, kind: Deployment}
  - group: charts.deep.example.com
    version: v1
    resource: chartdeeps
    chart: chart
`)
	deployment := func(name, values string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ ` + name + ` }}
spec:
  selector:
    matchLabels:
      app: {{ ` + name + ` }}
  template:
    metadata:
      labels:
        app: {{ ` + name + ` }}
    spec:
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          args: {{ toJson ` + values + `.deep }}
`
	}
	writeTestFile(t, filepath.Join(dir, "deep.yaml.tmpl"), deployment(".Name", ".Spec"))
	if err := os.MkdirAll(filepath.Join(dir, "chart", "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "chart", "Chart.yaml"), "apiVersion: v2\nname: deep\nversion: 0.1.0\n")
	writeTestFile(t, filepath.Join(dir, "chart", "values.yaml"), "deep: []\n")
	writeTestFile(t, filepath.Join(dir, "chart", "templates", "deployment.yaml"), deployment(".Release.Name", ".Values"))

	const bound = 16 << 20 // 4 times the default renderBudget.stringBytes
	for _, c := range []struct {
		name, apiVersion, kind string
		items                  int
		printed                bool
	}{
		{"own templates", "deep.example.com/v1", "Deep", 5000, false},
		{"chart mode", "charts.deep.example.com/v1", "ChartDeep", 5000, false},
		{"within the bound", "deep.example.com/v1", "Deep", 500, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "deep.json")
			writeTestFile(t, file, fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"deep"},"spec":{"deep":%s}}`,
				c.apiVersion, c.kind, deepListSpec(9990, c.items)))
			code, out, stderr, peak := runMeasured(t, "render", "--config", filepath.Join(dir, "stencil.yaml"), "-f", file)
			t.Logf("exit %d, %d bytes printed; stencil render's peak RSS %d MiB, its worker's %d MiB; the tree at most %d MiB (%s)",
				code, out.n, peak.stencil>>20, peak.worker>>20, peak.tree>>20, peak.how)
			if c.printed {
				if code != exitOK || out.n == 0 || out.n > bound {
					t.Errorf("exit %d, %d bytes printed: want the Deployment printed within %d bytes\n%s", code, out.n, bound, stderr)
				}
			} else {
				if code != exitFailed || out.n != 0 {
					t.Errorf("exit %d, %d bytes printed: want exit %d and nothing printed\n%s", code, out.n, exitFailed, stderr)
				}
				for _, s := range []string{"Deployment default/deep", "16777216 bytes", "renderBudget.stringBytes"} {
					if !strings.Contains(stderr, s) {
						t.Errorf("stderr lacks %q:\n%s", s, stderr)
					}
				}
			}
			if peak.tree > treeBound {
				if raceEnabled {
					t.Logf("over %d MiB under the race detector, which multiplies memory: not checked", treeBound>>20)
				} else {
					t.Errorf("the process tree held up to %d MiB, over %d MiB", peak.tree>>20, treeBound>>20)
				}
			}
		})
	}
}

// counter counts what is written to it, and keeps none of it.
type counter struct{ n int64 }

// Write counts p.
func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// treePeak is what a command's processes held resident at most.
type treePeak struct {
	// stencil and worker are the peaks (VmHWM) seen of stencil and of its
	// largest child.
	stencil, worker int64
	// tree bounds the whole tree from above, and how says how.
	tree int64
	how  string
}

// runMeasured runs stencil with args in its own process (this test
// binary, which is stencil's main and its render worker) and returns its
// exit status, what it printed, counted, its stderr, and the peak of its
// process tree.
func runMeasured(t *testing.T, args ...string) (int, *counter, string, treePeak) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Split(t.Name(), "/")[0]+"$")
	cmd.Env = append(os.Environ(), "STENCIL_RENDER_CHILD="+strings.Join(args, "\n"), "KUBECONFIG=/nonexistent")
	out, stderr := &counter{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak treePeak
	var err error
	pid := cmd.Process.Pid
poll:
	for {
		select {
		case err = <-done:
			break poll
		case <-time.After(2 * time.Millisecond):
			peak.stencil = max(peak.stencil, procKB(pid, "VmHWM:"))
			// A child is listed under the thread that started it.
			tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
			for _, task := range tasks {
				kids, _ := os.ReadFile(task)
				for _, k := range strings.Fields(string(kids)) {
					if k, err := strconv.Atoi(k); err == nil {
						peak.worker = max(peak.worker, procKB(k, "VmHWM:"))
					}
				}
			}
		}
	}
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	// wait4's maxrss is the largest peak of stencil and every process it
	// waited for (its worker, reaped at Close). With one worker at a time,
	// twice it bounds the tree from above whatever the polling missed.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		peak.tree, peak.how = 2*ru.Maxrss<<10, fmt.Sprintf("twice wait4's maxrss, %d MiB", ru.Maxrss>>10)
	}
	if sum := peak.stencil + peak.worker; sum > peak.tree {
		peak.tree, peak.how = sum, "the sum of the peaks seen"
	}
	return code, out, stderr.String(), peak
}

// procKB reads a size field (kB) of /proc/PID/status, in bytes.
func procKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}
