package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/funcs"
)

// orderProbes call each function of class MapOrder over the spec's map m,
// one line each, as an own template would.
var orderProbes = map[string]string{
	"keys":   "keys: {{ keys .Spec.m | join \",\" }}\nranged:\n{{- range keys .Spec.m }}\n- {{ . }}\n{{- end }}\n",
	"values": "values: {{ values .Spec.m | join \",\" }}\nvaluesOfTwo: {{ values .Spec.m | last }}\n",
}

// orderSpec is a spec whose map m has n keys, k00..., each value v00....
func orderSpec(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = fmt.Sprintf("v%02d", i)
	}
	return map[string]any{"Spec": map[string]any{"m": m}}
}

// renderOwn renders text as stencil renders an own template (parsed with
// the hermetic functions, rewritten, bound to a budgeted state, decoded)
// times times with a fresh spec of n keys each time, and returns each
// render's decoded document as JSON.
func renderOwn(t *testing.T, text string, n, times int) []string {
	t.Helper()
	root := template.New("probe").Option("missingkey=error").Funcs(funcs.Hermetic()).Funcs(ParseFuncs())
	tt, err := root.New("probe.yaml").Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(tt.Tree, true); err != nil {
		t.Fatal(err)
	}
	limits := budget.Limits{Steps: 1 << 24, StringBytes: 1 << 20, ListItems: 1 << 16, IncludeDepth: 10, TimeoutSeconds: 10}
	st := NewState(limits, true)
	Bind(root, &st, true, nil)
	out := make([]string, times)
	for i := range times {
		st.Reset()
		body, err := Execute(root, "probe.yaml", orderSpec(n), limits)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Decode(body, &st)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(js)
	}
	return out
}

// orderChildEnv names the file a child process of TestOwnTemplatesOrdered
// writes its renders to.
const orderChildEnv = "STENCIL_ORDER_CHILD_OUT"

// Own templates: every function of class MapOrder, over maps of 10 and
// 50 keys, renders the same bytes 100 times, and the same bytes in
// another process (whose maps hash with other seeds), in sorted order.
func TestOwnTemplatesOrdered(t *testing.T) {
	text := ""
	for _, name := range funcs.Named(funcs.MapOrder) {
		probe, ok := orderProbes[name]
		if !ok {
			t.Errorf("%s is classed MapOrder but has no probe in orderProbes", name)
		}
		text += probe
	}
	var renders []string
	for _, n := range []int{10, 50} {
		out := renderOwn(t, text, n, 100)
		for i, got := range out {
			if got != out[0] {
				t.Fatalf("%d keys: render %d differs from render 0:\n%s\n%s", n, i, got, out[0])
			}
		}
		renders = append(renders, out[0])
	}
	joined := strings.Join(renders, "\n")
	if path := os.Getenv(orderChildEnv); path != "" {
		if err := os.WriteFile(path, []byte(joined), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := `"keys":"k00,k01,k02,k03,k04,k05,k06,k07,k08,k09"`
	if !strings.Contains(renders[0], want) || !strings.Contains(renders[0], `"values":"v00,v01,v02,v03,v04,v05,v06,v07,v08,v09"`) ||
		!strings.Contains(renders[0], `"valuesOfTwo":"v09"`) {
		t.Errorf("10 keys rendered %s, want keys and values in the order of the sorted keys", renders[0])
	}
	path := filepath.Join(t.TempDir(), "child")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOwnTemplatesOrdered$", "-test.count=1")
	cmd.Env = append(os.Environ(), orderChildEnv+"="+path)
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
