package renderworker_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/templates/view"
)

// orderedConfig is one entry of own templates and one chart entry, each
// printing a tenant's map through every way Go's map order could leak:
// keys, values, range, toYaml and toJson.
var orderedConfig = map[string]string{
	"stencil.yaml": `resources:
  - group: test.example.com
    version: v1
    resource: probes
    templates: [maps.yaml.tmpl]
    children: [{apiVersion: v1, kind: ConfigMap}]
  - group: test.example.com
    version: v1
    resource: charted
    chart: chart
`,
	"maps.yaml.tmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
data:
  keys: {{ keys .Spec.labels | join "," | quote }}
  values: {{ values .Spec.labels | join "," | quote }}
  range: "{{ range $k, $v := .Spec.labels }}{{ $k }}={{ $v }};{{ end }}"
  yaml: {{ toYaml .Spec.labels | quote }}
  json: {{ toJson .Spec.labels | quote }}
`,
	"chart/Chart.yaml":  "apiVersion: v2\nname: maps\nversion: 0.1.0\n",
	"chart/values.yaml": "labels: {}\n",
	"chart/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  keys: {{ keys .Values.labels | join "," | quote }}
  values: {{ values .Values.labels | join "," | quote }}
  range: "{{ range $k, $v := .Values.labels }}{{ $k }}={{ $v }};{{ end }}"
  yaml: {{ toYaml .Values.labels | quote }}
  json: {{ toJson .Values.labels | quote }}
`,
}

// TestRenderSameAcrossWorkerProcesses: keys and values of a tenant's
// 10-key map, and every other way to print it, give the same bytes in 100
// renders spread over 4 render worker processes, in own templates and in
// chart mode. Go randomizes map iteration per range statement, so a
// function that follows it differs within one process as well as between
// processes; 4 processes also rule out anything decided once per process.
func TestRenderSameAcrossWorkerProcesses(t *testing.T) {
	pool := newPool(t, 4)
	dir := t.TempDir()
	for name, text := range orderedConfig {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, sets, err := reload.Source{Path: filepath.Join(dir, "stencil.yaml"), Wall: pool}.Load()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]any{}
	for i := range 10 {
		labels[fmt.Sprintf("key-%c", 'a'+rune((i*7)%10))] = strconv.Itoa(i)
	}
	for i, mode := range []string{"own templates", "chart mode"} {
		obj := probe("maps", map[string]any{"labels": labels})
		if i == 1 {
			obj.Resource = view.ResourceInfo{Group: "test.example.com", Version: "v1", Kind: "Charted", Resource: "charted"}
		}
		outputs := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				r, err := sets[i].RenderWith(obj, nil)
				if err != nil {
					errs <- err
					return
				}
				b, err := json.Marshal(r.Children)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				outputs[string(b)]++
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", mode, err)
		}
		workers := workerProcesses(t)
		t.Logf("%s: 100 renders over %d worker processes, %d distinct outputs", mode, workers, len(outputs))
		if len(outputs) != 1 {
			t.Errorf("%s: %d distinct outputs of one render in 100:\n%s", mode, len(outputs), strings.Join(keysOf(outputs), "\n"))
		}
		if workers < 2 {
			t.Errorf("%s: the renders ran in %d worker process, want several", mode, workers)
		}
		for out := range outputs {
			if !strings.Contains(out, `"keys":"key-a,key-b,key-c,key-d,key-e,key-f,key-g,key-h,key-i,key-j"`) {
				t.Errorf("%s: keys not sorted: %s", mode, out)
			}
		}
	}
}

// workerProcesses counts this process's children: the pool's workers.
func workerProcesses(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, n := strconv.Itoa(os.Getpid()), 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == self {
			n++
		}
	}
	return n
}

func keysOf(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
