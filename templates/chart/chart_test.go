package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cutil "helm.sh/helm/v4/pkg/chart/common/util"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// writeChart writes a chart named probe with the given templates (name
// to text) and values.yaml, and returns its directory.
func writeChart(t *testing.T, values string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "probe")
	files["Chart.yaml"] = "apiVersion: v2\nname: probe\nversion: 0.1.0\n"
	files["values.yaml"] = values
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// renderOne renders the probe chart with spec and returns its one object.
func renderOne(t *testing.T, dir string, spec map[string]any) (map[string]any, error) {
	t.Helper()
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
	if err != nil {
		return nil, err
	}
	if len(out.Manifests) != 1 {
		t.Fatalf("%d manifests, want 1", len(out.Manifests))
	}
	v, err := out.Manifests[0].Object, out.Manifests[0].Err
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any), nil
}

func data(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	d, ok := obj["data"].(map[string]any)
	if !ok {
		t.Fatalf("no data in %v", obj)
	}
	return d
}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n"

// Each case is a way a public chart once rendered differently from helm
// template (redis, metallb, redis-ha, fluent-bit, argo-cd), with what
// Helm renders.
func TestHelmSemanticsKept(t *testing.T) {
	t.Run("a brace before a trimmed action", func(t *testing.T) {
		// bitnami redis health-configmap.yaml: "run_redis_command() {" then "{{- if".
		dir := writeChart(t, "tls: false\n", map[string]string{"templates/cm.yaml": configMap +
			"  script: |\n    f() {\n    {{- if .Values.tls }} tls{{ end }}\n    }\n"})
		obj, err := renderOne(t, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := data(t, obj)["script"]; got != "f() {\n}\n" {
			t.Errorf("script = %q, want %q", got, "f() {\n}\n")
		}
	})
	t.Run("a block scalar ending the document keeps its newline", func(t *testing.T) {
		dir := writeChart(t, "", map[string]string{"templates/cm.yaml": configMap + "  config: |\n    {{- \"null\" | nindent 4 }}\n"})
		obj, err := renderOne(t, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := data(t, obj)["config"]; got != "null\n" {
			t.Errorf("config = %q, want %q", got, "null\n")
		}
	})
	t.Run("a missing value is <no value> inside include", func(t *testing.T) {
		dir := writeChart(t, "", map[string]string{
			"templates/_h.tpl":  `{{ define "maybe" }}{{ .Values.missing }}{{ end }}`,
			"templates/cm.yaml": configMap + "  len: {{ include \"maybe\" . | len | quote }}\n  printed: \"{{ include \"maybe\" . }}\"\n"})
		obj, err := renderOne(t, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := data(t, obj); d["len"] != "10" || d["printed"] != "" {
			t.Errorf("len %v printed %q, want 10 and \"\"", d["len"], d["printed"])
		}
	})
	t.Run("quote inside an include read back by fromYaml", func(t *testing.T) {
		dir := writeChart(t, "", map[string]string{
			"templates/_h.tpl":  `{{ define "kv" }}key: {{ .Values.v | quote }}{{ end }}`,
			"templates/cm.yaml": configMap + "  back: {{ (include \"kv\" . | fromYaml).key | quote }}\n"})
		v := "line1\nline2: \"x\""
		obj, err := renderOne(t, dir, map[string]any{"v": v})
		if err != nil {
			t.Fatal(err)
		}
		if got := data(t, obj)["back"]; got != v {
			t.Errorf("back = %q, want %q", got, v)
		}
	})
	t.Run("toJson of a hostile string is the string", func(t *testing.T) {
		dir := writeChart(t, "", map[string]string{"templates/cm.yaml": configMap + "  j: {{ .Values.v | toJson }}\n"})
		obj, err := renderOne(t, dir, map[string]any{"v": "a: b"})
		if err != nil {
			t.Fatal(err)
		}
		if got := data(t, obj)["j"]; got != "a: b" {
			t.Errorf("j = %q, want %q", got, "a: b")
		}
	})
	t.Run("Helm's own functions stay Helm's", func(t *testing.T) {
		dir := writeChart(t, "", map[string]string{"templates/cm.yaml": configMap + "  h: {{ getHostByName \"localhost\" | quote }}\n"})
		obj, err := renderOne(t, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := data(t, obj)["h"]; got != "" {
			t.Errorf("getHostByName = %q, want \"\" (Helm without DNS)", got)
		}
		dir = writeChart(t, "", map[string]string{"templates/cm.yaml": configMap + "{{ fail \"boom\" }}\n"})
		_, err = renderOne(t, dir, nil)
		if err == nil || !strings.Contains(err.Error(), "execution error at (probe/templates/cm.yaml:6") || !strings.Contains(err.Error(), "boom") {
			t.Errorf("fail: %v, want Helm's execution error naming probe/templates/cm.yaml:6", err)
		}
	})
	t.Run("the clock, used and unused", func(t *testing.T) {
		// argo-cd: default (dateInZone "..." (now) "UTC") .Values.mtime
		unused := writeChart(t, "mtime: \"2024-01-01\"\n", map[string]string{"templates/cm.yaml": configMap +
			"  mtime: {{ default (dateInZone \"2006-01-02T15:04:05Z\" (now) \"UTC\") .Values.mtime | quote }}\n"})
		obj, err := renderOne(t, unused, nil)
		if err != nil {
			t.Fatalf("now whose value is not used: %v", err)
		}
		if got := data(t, obj)["mtime"]; got != "2024-01-01" {
			t.Errorf("mtime = %q", got)
		}
		_, err = renderOne(t, unused, map[string]any{"mtime": ""})
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Func != "now" || refused.Loc != "probe/templates/cm.yaml:6" {
			t.Errorf("now whose value lands in the ConfigMap: %v, want refused at probe/templates/cm.yaml:6", err)
		}
	})
}

// Nothing outside the chart is read at render: every schema keyword that
// refers to another document is refused at load, naming it; references
// inside the file and the drafts the validator knows are kept.
func TestSchemaReferencesStayInTheChart(t *testing.T) {
	for _, tc := range []struct {
		schema, refused string
	}{
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "string"}}}`, ""},
		{`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"a": {"$dynamicAnchor": "a", "type": "string"}}, "properties": {"a": {"$dynamicRef": "#a"}}}`, ""},
		{`{"$schema": "http://json-schema.org/schema#"}`, ""},
		{`{"$schema": "http://attacker.example/schema"}`, "$schema http://attacker.example/schema"},
		{`{"$schema": "file:///etc/passwd"}`, "$schema file:///etc/passwd"},
		{`{"properties": {"a": {"$dynamicRef": "file:///etc/shadow"}}}`, "$dynamicRef file:///etc/shadow"},
		{`{"properties": {"a": {"$recursiveRef": "https://x.example/s.json"}}}`, "$recursiveRef https://x.example/s.json"},
		{`{"properties": {"a": {"$ref": "https://x.example/s.json"}}}`, "$ref https://x.example/s.json"},
	} {
		dir := writeChart(t, "a: x\n", map[string]string{"templates/cm.yaml": configMap + "  a: {{ .Values.a }}\n", "values.schema.json": tc.schema})
		_, err := Load(dir)
		if tc.refused == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.schema, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "values.schema.json") {
			t.Errorf("%s: err = %v, want it refused naming %q", tc.schema, err, tc.refused)
		}
	}
}

// A tenant's text is not a template: bitnami's common.tplvalues.render
// passes a value holding "{{" to tpl, so a tenant's annotation of
// "{{ .Values.tls.key }}" read the key the platform set in overrideValues,
// and "{{ .Release.Name }}" then a newline changed the shape. By default the
// text lands as the literal text it is, whatever the chart does with it;
// with tenantTemplates it runs, under the budget.
func TestTenantTextIsNotATemplate(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	secret := "{{ .Values.platformSecret }}"
	spec := map[string]any{"tls": map[string]any{"enabled": false},
		"commonAnnotations": map[string]any{"a": secret, "b": "{{ .Release.Name }}\nevil: x", "c": "a\uE001\uE002{\uE001b{{{", "d": "{{ x"}}
	overrides := map[string]string{"platformSecret": "s3cr3t"}
	render := func(tenantTemplates bool) map[string]any {
		t.Helper()
		out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Overrides: overrides,
			Budget: budget.Limits(config.RenderBudget{}.WithDefaults()), TenantTemplates: tenantTemplates})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Manifests {
			v, err := m.Object, m.Err
			if err != nil {
				t.Fatal(err)
			}
			obj := v.(map[string]any)
			if obj["kind"] == "Deployment" {
				return obj["metadata"].(map[string]any)["annotations"].(map[string]any)
			}
		}
		t.Fatal("no Deployment")
		return nil
	}
	got := render(false)
	if got["a"] != secret || got["b"] != "{{ .Release.Name }}\nevil: x" || got["c"] != "a\uE001\uE002{\uE001b{{{" || got["d"] != "{{ x" || len(got) != 4 {
		t.Errorf("annotations %q, want the tenant's text as written", got)
	}
	spec["commonAnnotations"] = map[string]any{"a": secret}
	if ran := render(true); ran["a"] != "s3cr3t" {
		t.Errorf("with tenantTemplates: annotations %q, want the text run", ran)
	}
	// Run, the text's output still lands as one value.
	spec["commonAnnotations"] = map[string]any{"b": "{{ .Release.Name }}\nevil: x"}
	if ran := render(true); ran["b"] != "demo\nevil: x" || len(ran) != 1 {
		t.Errorf("with tenantTemplates: annotations %q, want the text's output as one value", ran)
	}
}

// The safety follows the value, whatever the chart did to it: helm
// create's chart prints nameOverride through trunc 63, so the printed text
// of a 76-byte name holding a newline is not the value itself, and that
// newline would add a label to every object (and to the Service's
// selector). No object gains a field: the render is refused naming the
// object and the field.
func TestTransformedTenantValueCannotAddFields(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "charts", "mychart"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []map[string]any{
		{"nameOverride": "n\nevil: yes" + strings.Repeat("z", 60)},
		{"nameOverride": strings.Repeat("z", 50) + "\nevil: YES" + strings.Repeat("z", 10), "podAnnotations": map[string]any{"a": "{\"k\": 1}"}},
		{"fullnameOverride": "f\nfinalizers: [x]\n" + strings.Repeat("z", 60)},
	} {
		out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: spec, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
		if err != nil {
			// Refused: as text that is not YAML, or a value Kubernetes refuses.
			t.Logf("%q: %v", spec, err)
			continue
		}
		for _, m := range out.Manifests {
			v, err := m.Object, m.Err
			if err != nil {
				continue
			}
			for _, p := range fieldPaths(v, nil) {
				if strings.Contains(p, "evil") || strings.Contains(p, "finalizers") {
					t.Errorf("%q: %s has %s", spec, m.Template, p)
				}
			}
		}
	}
}

// What a chart makes of a tenant's value is the tenant's: trunc, lower,
// printf and replace of a value holding a newline once added a label.
// Their results are tainted, so the value lands as one label value, and
// the label holds exactly what the function made of it.
func TestTransformedValueLandsAsOneValue(t *testing.T) {
	name := "A\n    evil: yes" + strings.Repeat("q", 20)
	for action, want := range map[string]string{
		`{{ .Values.name | trunc 20 }}`:       name[:20],
		`{{ lower .Values.name }}`:            strings.ToLower(name),
		`{{ printf "%s-x" .Values.name }}`:    name + "-x",
		`{{ .Values.name | replace "q" "" }}`: strings.ReplaceAll(name, "q", ""),
	} {
		dir := writeChart(t, "name: web\n", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: " + action + "\ndata: {}\n"})
		c, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Budget: budget.Limits(config.RenderBudget{}.WithDefaults()),
			Spec: map[string]any{"name": name}})
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		v, _ := out.Manifests[0].Object, out.Manifests[0].Err
		if labels := v.(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any); len(labels) != 1 || labels["app"] != want {
			t.Errorf("%s: labels %q, want app: %q alone", action, labels, want)
		}
	}
	// A benign value renders as before.
	dir := writeChart(t, "name: web\n", map[string]string{"templates/cm.yaml": configMap + "  app: {{ .Values.name | trunc 20 }}\n"})
	if obj, err := renderOne(t, dir, map[string]any{"name": "plain-name"}); err != nil || data(t, obj)["app"] != "plain-name" {
		t.Errorf("benign: %v %v", obj, err)
	}
}

// Context is judged in context: toJson's output is serialised data, but
// between squote's quotes in a flow list a tenant's quote and commas added
// a container argument. The render keeps its one argument.
func TestSquoteOfToJsonKeepsOneArgument(t *testing.T) {
	dir := writeChart(t, "config: {}\n", map[string]string{"templates/cm.yaml": configMap + "  args: [--config, {{ toJson .Values.config | squote }}]\n"})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Budget: budget.Limits(config.RenderBudget{}.WithDefaults()),
		Spec: map[string]any{"config": map[string]any{"a": "x', --evil, 'y"}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := out.Manifests[0].Object, out.Manifests[0].Err
	if err != nil {
		t.Fatal(err)
	}
	if args := data(t, v.(map[string]any))["args"].([]any); len(args) != 2 || args[1] != `{"a":"x', --evil, 'y"}` {
		t.Errorf("args %q, want --config and one value", args)
	}
}

// Values are checked against values.schema.json with the schema compiled
// once at load, and the render fails with Helm's own message.
func TestSchemaValidationAsHelm(t *testing.T) {
	dir := writeChart(t, "replicas: 1\n", map[string]string{"templates/cm.yaml": configMap + "  r: {{ .Values.replicas | quote }}\n",
		"values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 0}}, "required": ["replicas"]}`})
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: map[string]any{"replicas": "x"}, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())})
	vals, verr := Values(map[string]any{"replicas": "x"}, nil)
	if verr != nil {
		t.Fatal(verr)
	}
	coalesced, cerr := cutil.CoalesceValues(c.ch, vals)
	if cerr != nil {
		t.Fatal(cerr)
	}
	want := cutil.ValidateAgainstSchema(c.ch, coalesced)
	if err == nil || want == nil || !strings.Contains(err.Error(), want.Error()) {
		t.Errorf("err = %v, want Helm's %v", err, want)
	}
	if _, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: map[string]any{"replicas": int64(2)}, Budget: budget.Limits(config.RenderBudget{}.WithDefaults())}); err != nil {
		t.Errorf("valid values: %v", err)
	}
}
