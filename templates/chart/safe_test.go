package chart

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// hostileStrings are tenant strings that YAML reads as syntax in some
// position: each tries to add a key, an item, a document, a comment, an
// anchor, or to close the quotes it is printed between.
var hostileStrings = []string{
	"x\n  evil: true",
	"x\nevil: true",
	"a: b",
	"x # comment",
	`x", "evil": "y`,
	"x' , evil: 'y",
	"[1, 2]",
	"{evil: true}",
	"- item",
	"|\n  block",
	"&anchor x",
	"*alias",
	"x\r\nevil: true",
	"---\nkind: Secret",
	"x\\\"y",
	"\tx: y",
}

// TestHostileValuesKeepFieldPaths is the chart mode's property: a
// tenant's string in any scalar value of a chart leaves every object's set
// of field paths as in a benign render. For every vendored chart and value
// set, each string value of the spec (the chart's values.yaml under it)
// is replaced, one at a time, by hostile strings (two per value, taking
// turns through the list, so every one is tried on some hundred values of
// three charts; all of them per value when STENCIL_HOSTILE_ALL=1), and the render is
// compared with one where the same value is the benign "benign": the same
// objects, in the same order, each with the same field paths. A hostile
// render may fail instead (a value Kubernetes would refuse, a schema), but
// it may never add or remove a field.
func TestHostileValuesKeepFieldPaths(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("value sets: %v", err)
	}
	caps, err := capsFor("v1.37.0")
	if err != nil {
		t.Fatal(err)
	}
	compared, failed, turn := 0, 0, 0
	perValue := 2
	if os.Getenv("STENCIL_HOSTILE_ALL") == "1" {
		perValue = len(hostileStrings)
	}
	for _, file := range cases {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		chartName, _, _ := strings.Cut(name, "-")
		c, err := Load(filepath.Join("testdata", "charts", chartName))
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := yaml.Unmarshal(data, &spec); err != nil {
			t.Fatal(err)
		}
		// Every string leaf of the values the chart sees, spec over
		// values.yaml: the tenant may set any of them.
		all := mergeValues(deepCopy(c.ch.Values), spec)
		for _, path := range stringLeaves(all, nil) {
			benign, err := pathsOf(c, setLeaf(all, path, "benign"), caps)
			if err != nil {
				continue // the chart itself refuses a benign string there
			}
			for range perValue {
				h := hostileStrings[turn%len(hostileStrings)]
				turn++
				got, err := pathsOf(c, setLeaf(all, path, h), caps)
				if err != nil {
					failed++
					continue
				}
				compared++
				if !slices.Equal(got, benign) {
					t.Errorf("%s: %s = %q changes the objects' field paths:\n%s", name, strings.Join(path, "."), h, diffPaths(benign, got))
				}
			}
		}
	}
	if compared < 500 {
		t.Errorf("only %d hostile renders compared (%d refused): the property is not exercised", compared, failed)
	}
	t.Logf("%d hostile renders kept every object's field paths; %d were refused", compared, failed)
}

// pathsOf renders the chart with spec and returns, object by object in
// order, "Kind path" for every field.
func pathsOf(c *Chart, spec map[string]any, caps *common.Capabilities) ([]string, error) {
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Capabilities: caps, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
	if err != nil {
		return nil, err
	}
	var paths []string
	for i, m := range out.Manifests {
		v, err := m.Object, m.Err
		if err != nil {
			return nil, err
		}
		obj, _ := v.(map[string]any)
		prefix := fmt.Sprintf("%d %v", i, obj["kind"])
		walkPaths(v, prefix, &paths)
	}
	return paths, nil
}

func walkPaths(v any, prefix string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkPaths(v[k], prefix+"."+k, out)
		}
	case []any:
		for i, e := range v {
			walkPaths(e, fmt.Sprintf("%s[%d]", prefix, i), out)
		}
	default:
		*out = append(*out, prefix)
	}
}

func stringLeaves(v any, path []string) [][]string {
	var out [][]string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, stringLeaves(v[k], append(slices.Clone(path), k))...)
		}
	case string:
		out = append(out, path)
	}
	return out
}

func setLeaf(m map[string]any, path []string, s string) map[string]any {
	out := deepCopy(m)
	cur := out
	for _, k := range path[:len(path)-1] {
		cur = cur[k].(map[string]any)
	}
	cur[path[len(path)-1]] = s
	return out
}

func mergeValues(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

func diffPaths(want, got []string) string {
	var b strings.Builder
	for _, p := range got {
		if !slices.Contains(want, p) {
			fmt.Fprintf(&b, "+ %s\n", p)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	return b.String()
}

func capsFor(v string) (*common.Capabilities, error) {
	kv, err := common.ParseKubeVersion(v)
	if err != nil {
		return nil, err
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	return caps, nil
}
