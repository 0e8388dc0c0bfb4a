package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stencil.dev/stencil/templates/funcs"
)

// chartOrderProbes call each function of class MapOrder, and each of
// Helm's own serialisers, over the tenant's map m and the chart's own map
// own, as a chart would: one ConfigMap key each.
var chartOrderProbes = map[string]string{
	"keys": "  keys: {{ keys .Values.m | join \",\" | quote }}\n  ownKeys: {{ keys .Values.own | join \",\" | quote }}\n" +
		"  bothKeys: {{ keys .Values.own .Values.m | join \",\" | quote }}\n" +
		"  ranged: {{ range keys .Values.m }}{{ . }};{{ end }}\n",
	"values": "  values: {{ values .Values.m | join \",\" | quote }}\n  ownValues: {{ values .Values.own | join \",\" | quote }}\n",
	// A checksum of the tenant's map (checksum/config annotations): it
	// rolls the pods whenever it changes.
	"toYaml":       "  toYaml: {{ toYaml .Values.m | quote }}\n  checksum: {{ toYaml .Values.m | sha256sum | quote }}\n",
	"mustToYaml":   "  mustToYaml: {{ mustToYaml .Values.m | quote }}\n",
	"toYamlPretty": "  toYamlPretty: {{ toYamlPretty .Values.m | quote }}\n",
	"toJson":       "  toJson: {{ toJson .Values.m | quote }}\n",
	"mustToJson":   "  mustToJson: {{ mustToJson .Values.m | quote }}\n",
	"toToml":       "  toToml: {{ toToml .Values.m | quote }}\n",
	"mustToToml":   "  mustToToml: {{ mustToToml .Values.m | quote }}\n",
}

// orderedNames are the functions the chart probes must cover: those of
// class MapOrder, and Helm's own serialisers (which sort: Helm's, bound
// as they are, so a Helm upgrade that stopped sorting fails here).
func orderedNames() []string {
	names := funcs.Named(funcs.MapOrder)
	for _, name := range funcs.Named(funcs.Serialiser) {
		if funcs.Is(name, funcs.HelmOwn) {
			names = append(names, name)
		}
	}
	return names
}

// orderMap is a map of n keys, prefix00..., each value v00....
func orderMap(prefix string, n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("%s%02d", prefix, i)] = fmt.Sprintf("v%02d", i)
	}
	return m
}

// orderChartEnv names the directory of the probe chart a child process
// of TestChartModeOrdered renders, and the file it writes its renders to.
const (
	orderChartEnv = "STENCIL_ORDER_CHART"
	orderChildEnv = "STENCIL_ORDER_CHILD_OUT"
)

// Chart mode: every function of class MapOrder and each of Helm's own
// serialisers, over the tenant's maps of 10 and 50 keys and the chart's
// own, renders the same bytes 100 times, and the same bytes in another
// process (whose maps hash with other seeds); keys and values in sorted
// order. (The serialisers are given the tenant's keys as placeholders,
// which they sort: numbered in Go's map order, they wrote the keys in
// another order on every render, engine.State.Placeholders.)
func TestChartModeOrdered(t *testing.T) {
	dir := os.Getenv(orderChartEnv)
	if dir == "" {
		text := configMap
		for _, name := range orderedNames() {
			probe, ok := chartOrderProbes[name]
			if !ok {
				t.Errorf("%s has no probe in chartOrderProbes", name)
			}
			text += probe
		}
		own, err := json.Marshal(map[string]any{"own": orderMap("o", 10)})
		if err != nil {
			t.Fatal(err)
		}
		dir = writeChart(t, string(own)+"\n", map[string]string{"templates/cm.yaml": text})
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var renders []string
	for _, n := range []int{10, 50} {
		var first string
		for i := range 100 {
			js, err := json.Marshal(objects(t, c, map[string]any{"m": orderMap("k", n)}))
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = string(js)
			} else if string(js) != first {
				t.Fatalf("%d keys: render %d differs from render 0:\n%s\n%s", n, i, js, first)
			}
		}
		renders = append(renders, first)
	}
	joined := strings.Join(renders, "\n")
	if path := os.Getenv(orderChildEnv); path != "" {
		if err := os.WriteFile(path, []byte(joined), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var objs []struct{ Data map[string]string }
	if err := json.Unmarshal([]byte(renders[0]), &objs); err != nil || len(objs) != 1 {
		t.Fatalf("10 keys rendered %s (%v), want one ConfigMap", renders[0], err)
	}
	data := objs[0].Data
	k, o, v := make([]string, 10), make([]string, 10), make([]string, 10)
	for i := range 10 {
		k[i], o[i], v[i] = fmt.Sprintf("k%02d", i), fmt.Sprintf("o%02d", i), fmt.Sprintf("v%02d", i)
	}
	want := map[string]string{
		"keys": strings.Join(k, ","), "ownKeys": strings.Join(o, ","), "bothKeys": strings.Join(slices.Concat(o, k), ","),
		"ranged": strings.Join(k, ";") + ";", "values": strings.Join(v, ","), "ownValues": strings.Join(v, ","),
	}
	for key, w := range want {
		if data[key] != w {
			t.Errorf("data.%s = %q, want %q", key, data[key], w)
		}
	}
	path := filepath.Join(t.TempDir(), "child")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChartModeOrdered$", "-test.count=1")
	cmd.Env = append(os.Environ(), orderChartEnv+"="+dir, orderChildEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	child, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(child) != joined {
		t.Errorf("another process rendered\n%s\nthis one\n%s", child, joined)
	}
}
