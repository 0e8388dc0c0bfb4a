package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/engine"
)

// Issue 51's classes of attack, each with inputs of its own: each test
// failed on the code before the safety core's change it names.

// leaves calls f with every string of v, keys included, and its path.
func leaves(v any, path string, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case map[string]any:
		for k, e := range v {
			f(path+"."+k+" (key)", k)
			leaves(e, path+"."+k, f)
		}
	case []any:
		for i, e := range v {
			leaves(e, fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

// A tenant string shaped like a placeholder is text: placeholders carry a
// secret drawn per render. Before, "zzstencilvv00000000z" in a spec was
// resolved to the first placed value: the platform's password.
func TestForgedPlaceholderIsText(t *testing.T) {
	dir := writeChart(t, "db: {}\nname: web\n", map[string]string{"templates/cm.yaml": configMap +
		"  url: {{ printf \"postgres://%s:%s@db\" .Values.user .Values.db.password | quote }}\n  name: {{ .Values.name }}\n" +
		"  copy: \"db/{{ .Values.name }}\"\n  other: {{ .Values.other }}\n"})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const password = "s3cr3t-w0rd"
	for _, forged := range []string{"zzstencilvv00000000z", "zzstencilvv00000001z", "zzstencilaaaaaaaaaaaaaaaav00000000z", "zzstencilvq00000000z"} {
		// A user with a '#' makes the url a placed value, which the forged
		// placeholder named.
		spec := map[string]any{"user": "app#1", "name": forged, "other": "x: " + forged}
		out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec,
			Overrides: map[string]string{"db.password": password}, Budget: config.RenderBudget{}.WithDefaults()})
		if err != nil {
			t.Fatalf("%s: %v", forged, err)
		}
		v, err := engine.Decode(out.Manifests[0].Body, out.State)
		if err != nil {
			t.Fatal(err)
		}
		d := data(t, v.(map[string]any))
		leaves(d, "data", func(path, s string) {
			if strings.Contains(s, "w0rd") && path != "data.url" {
				t.Errorf("%s: the platform's password reached %s: %q", forged, path, s)
			}
		})
		if d["name"] != forged || d["copy"] != "db/"+forged || d["other"] != "x: "+forged || d["url"] != "postgres://app#1:"+password+"@db" {
			t.Errorf("%s: data %q, want the tenant's text as written", forged, d)
		}
	}
}
