package templates

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/readview"
)

// The password the leak tests plant, and its base64 (a Secret's data).
const leakPassword = "hunter2-s3cret"

var leakEncoded = base64.StdEncoding.EncodeToString([]byte(leakPassword))

// leakedIn returns what of the planted password text holds: the plain
// text or its base64, whole or in part (an encoder may wrap or escape).
func leakedIn(text string) []string {
	var out []string
	for _, needle := range []string{leakPassword, "hunter2", leakEncoded, leakEncoded[:12]} {
		if strings.Contains(text, needle) {
			out = append(out, needle)
		}
	}
	return out
}

// leakSecrets are the two Secrets of the issue: db-applied, created with
// kubectl apply (its last-applied annotation holds the whole manifest,
// stringData included, and managedFields name its keys), and
// db-annotated, whose own annotations repeat the password. Both carry
// owner references, and stringData, which the API server never returns
// but a file given to stencil render --reads may.
func leakSecrets(ns string) []*unstructured.Unstructured {
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db-applied", "namespace": ns},
		"stringData": map[string]any{"password": leakPassword}, "data": map[string]any{"encoded": leakEncoded}})
	common := func(name string, annotations map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name, "resourceVersion": "7",
				"labels": map[string]any{"app": "db"}, "annotations": annotations,
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner-" + leakPassword, "uid": "u"}},
				"managedFields": []any{map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update",
					"fieldsV1": map[string]any{"f:data": map[string]any{"f:password": map[string]any{}}, "f:metadata": map[string]any{
						"f:annotations": map[string]any{"f:" + corev1.LastAppliedConfigAnnotation: map[string]any{}}}}}}},
			"type":       "Opaque",
			"data":       map[string]any{"password": leakEncoded},
			"stringData": map[string]any{"password": leakPassword},
		}}
	}
	return []*unstructured.Unstructured{
		common("db-applied", map[string]any{corev1.LastAppliedConfigAnnotation: string(manifest)}),
		common("db-annotated", map[string]any{"team.example.com/password": leakPassword, "team.example.com/encoded": leakEncoded}),
	}
}

// leakConfig is an entry that reads the Secret the tenant names twice:
// closed (no secretData) and open (secretData: true). Both come from the
// same source holding the whole Secret, so the view must apply the
// allowlist whatever its cache kept.
const leakConfig = `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    kind: WebApp
    schema: {spec: {passwordSecret: string}}
    children: [{apiVersion: v1, kind: ConfigMap}]
    templates: [cm.tmpl]
    reads:
      - {name: closed, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.passwordSecret }}"}
      - {name: open, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.passwordSecret }}", secretData: true}
`

// loadFiles writes files under a new directory and loads its stencil.yaml's
// first entry.
func loadFiles(t *testing.T, files map[string]string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return Load(cfg, cfg.Resources[0], Options{})
}

// renderLeak resolves s's reads of secret over the leak Secrets and
// renders; it returns what was rendered (the children as JSON, or the
// error's text), status.reads as JSON, and the reads.
func renderLeak(t *testing.T, s *Set, secret string) (rendered, status string, reads *Reads) {
	t.Helper()
	p := parent()
	p.Spec = map[string]any{"passwordSecret": secret}
	reads, err := s.ResolveReads(p, &fakeReads{objs: leakSecrets(p.Namespace)})
	if err != nil {
		return "error: " + err.Error(), "", nil
	}
	st, err := json.Marshal(reads.Status())
	if err != nil {
		t.Fatal(err)
	}
	p.Reads = reads.Values
	r, err := s.RenderHere(p, nil, nil)
	if err != nil {
		return "error: " + err.Error(), string(st), reads
	}
	out, err := json.Marshal(r.Children)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(st), reads
}

// TestReadOfSecretShowsNoData: a template that prints a Secret read
// without secretData whole (toYaml, toJson, printf), copies its
// annotations onto its child, or reads its last-applied annotation, owner
// references, managedFields or stringData, prints no byte of the data,
// for a Secret applied with kubectl and one annotated by its owner; nor
// do status.reads or a render error that prints the read. The same
// Secret read with secretData still gives its data, without last-applied
// or managedFields.
func TestReadOfSecretShowsNoData(t *testing.T) {
	attack := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
  annotations: {{ toJson (get (read "closed").metadata "annotations" dict) }}
  labels: {{ toJson (get (read "closed").metadata "labels" dict) }}
data:
  yaml: {{ toYaml (read "closed") | quote }}
  json: {{ toJson (read "closed") }}
  printed: {{ printf "%v" (read "closed") | quote }}
  lastApplied: {{ get (get (read "closed").metadata "annotations" nil) "kubectl.kubernetes.io/last-applied-configuration" "none" }}
  own: {{ get (get (read "closed").metadata "annotations" nil) "team.example.com/password" "none" }}
  owners: {{ toJson (get (read "closed").metadata "ownerReferences" nil) }}
  managed: {{ toJson (get (read "closed").metadata "managedFields" nil) }}
  sd: {{ toJson (get (read "closed") "stringData" nil) }}
  keys: {{ keys (read "closed").data | sortAlpha | join "," }}
`
	failing := `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  x: {{ required (printf "no key nope in %s" (toJson (read "closed"))) (get (read "closed").data "nope" nil) }}
`
	for _, secret := range []string{"db-applied", "db-annotated"} {
		t.Run(secret, func(t *testing.T) {
			s, err := loadFiles(t, map[string]string{"stencil.yaml": leakConfig, "cm.tmpl": attack})
			if err != nil {
				t.Fatal(err)
			}
			rendered, status, reads := renderLeak(t, s, secret)
			if strings.HasPrefix(rendered, "error: ") {
				t.Fatal(rendered)
			}
			if got := leakedIn(rendered); got != nil {
				t.Errorf("the rendered child holds %q: %s", got, rendered)
			}
			if got := leakedIn(status); got != nil {
				t.Errorf("status.reads holds %q: %s", got, status)
			}
			for _, what := range []string{corev1.LastAppliedConfigAnnotation, "team.example.com", "managedFields", "stringData", "uid-db"} {
				if strings.Contains(rendered, what) {
					t.Errorf("the rendered child holds %s: %s", what, rendered)
				}
			}
			// What the read does show: key names, labels, type.
			for _, what := range []string{`"keys":"password"`, `"app":"db"`, `Opaque`} {
				if !strings.Contains(rendered, what) {
					t.Errorf("the rendered child lacks %s: %s", what, rendered)
				}
			}
			if !strings.Contains(status, `"name":"`+secret+`"`) || !strings.Contains(status, `"resourceVersion":"7"`) {
				t.Errorf("status.reads does not name the Secret: %s", status)
			}

			// With secretData: the data, and still neither last-applied
			// nor managedFields.
			open := reads.Values["open"].(map[string]any)
			if got, _, _ := unstructured.NestedString(open, "data", "password"); got != leakEncoded {
				t.Errorf("a read with secretData: data.password = %q, want %q", got, leakEncoded)
			}
			md := open["metadata"].(map[string]any)
			if _, ok := md["managedFields"]; ok {
				t.Errorf("a read with secretData keeps managedFields: %v", md)
			}
			if a, _ := md["annotations"].(map[string]any); a[corev1.LastAppliedConfigAnnotation] != nil {
				t.Errorf("a read with secretData keeps the last-applied annotation: %v", a)
			}
			openSet, err := loadFiles(t, map[string]string{"stencil.yaml": leakConfig,
				"cm.tmpl": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Name }}}\ndata: {password: {{ (read \"open\").data.password }}}\n"})
			if err != nil {
				t.Fatal(err)
			}
			if rendered, _, _ := renderLeak(t, openSet, secret); !strings.Contains(rendered, `"password":"`+leakEncoded+`"`) {
				t.Errorf("a template reading with secretData did not print the data: %s", rendered)
			}

			// An error message that prints the read holds none of it.
			failSet, err := loadFiles(t, map[string]string{"stencil.yaml": leakConfig, "cm.tmpl": failing})
			if err != nil {
				t.Fatal(err)
			}
			msg, _, _ := renderLeak(t, failSet, secret)
			if !strings.HasPrefix(msg, "error: ") || !strings.Contains(msg, "no key nope in") {
				t.Fatalf("want the render to fail printing the read, got %s", msg)
			}
			if got := leakedIn(msg); got != nil {
				t.Errorf("the error holds %q: %s", got, msg)
			}
		})
	}
}

// leakChart is a chart that looks the two Secrets up and copies what it
// finds onto its ConfigMaps, whole and as annotations.
var leakChart = map[string]string{
	"chart/Chart.yaml":  "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
	"chart/values.yaml": "{}\n",
	"chart/templates/cm.yaml": `{{- range $name := list "db-applied" "db-annotated" }}
{{- $s := lookup "v1" "Secret" $.Release.Namespace $name }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-{{ $name }}
  {{- with $s.metadata.annotations }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  found: {{ if $s }}"yes"{{ else }}"no"{{ end }}
  yaml: {{ toYaml $s | quote }}
  json: {{ toJson $s | quote }}
  password: {{ get (default dict $s.data) "password" | default "none" | quote }}
  sd: {{ toJson $s.stringData | quote }}
  list: {{ toJson (lookup "v1" "Secret" $.Release.Namespace "") | quote }}
{{- end }}
`,
}

// chartLeakConfig reads both Secrets by name; secretData is "" or
// " secretData: true,".
func chartLeakConfig(secretData string) string {
	return fmt.Sprintf(`resources:
  - group: apps.example.com
    version: v1
    resource: looks
    chart: chart
    children: [{apiVersion: v1, kind: ConfigMap}]
    reads:
      - {name: applied, apiVersion: v1, kind: Secret,%[1]s objectName: db-applied}
      - {name: annotated, apiVersion: v1, kind: Secret,%[1]s objectName: db-annotated}
`, secretData)
}

// TestChartLookupOfSecretShowsNoData: Helm's lookup answers with the
// read's view: a chart that copies a looked-up Secret whole, or its
// annotations, prints no byte of its data without secretData; with it,
// the data and still no last-applied annotation.
func TestChartLookupOfSecretShowsNoData(t *testing.T) {
	files := func(config string) map[string]string {
		out := map[string]string{"stencil.yaml": config}
		for k, v := range leakChart {
			out[k] = v
		}
		return out
	}
	s, err := loadFiles(t, files(chartLeakConfig("")))
	if err != nil {
		t.Fatal(err)
	}
	rendered, status, _ := renderLeak(t, s, "")
	if strings.HasPrefix(rendered, "error: ") {
		t.Fatal(rendered)
	}
	if strings.Count(rendered, `"found":"yes"`) != 2 {
		t.Fatalf("the chart did not find both Secrets: %s", rendered)
	}
	if got := leakedIn(rendered); got != nil {
		t.Errorf("the rendered children hold %q: %s", got, rendered)
	}
	if got := leakedIn(status); got != nil {
		t.Errorf("status.reads holds %q: %s", got, status)
	}
	for _, what := range []string{"last-applied", "team.example.com", "managedFields", `"password":"none"`} {
		if want := what == `"password":"none"`; strings.Contains(rendered, what) != want {
			t.Errorf("the rendered children: %s present is %v, want %v: %s", what, !want, want, rendered)
		}
	}

	// With secretData: the data, and still no last-applied annotation.
	s, err = loadFiles(t, files(chartLeakConfig(" secretData: true,")))
	if err != nil {
		t.Fatal(err)
	}
	rendered, _, _ = renderLeak(t, s, "")
	if strings.Count(rendered, `"password":"`+leakEncoded+`"`) != 2 {
		t.Errorf("a lookup with secretData did not print the data: %s", rendered)
	}
	if strings.Contains(rendered, "last-applied") || strings.Contains(rendered, "managedFields") {
		t.Errorf("a lookup with secretData printed last-applied or managedFields: %s", rendered)
	}

	// A chart's fail that prints the lookup holds none of it.
	failing := files(chartLeakConfig(""))
	failing["chart/templates/cm.yaml"] = `{{ fail (toJson (lookup "v1" "Secret" .Release.Namespace "db-applied")) }}`
	s, err = loadFiles(t, failing)
	if err != nil {
		t.Fatal(err)
	}
	msg, _, _ := renderLeak(t, s, "")
	if !strings.HasPrefix(msg, "error: ") {
		t.Fatalf("want the render to fail printing the lookup, got %s", msg)
	}
	if got := leakedIn(msg); got != nil {
		t.Errorf("the error holds %q: %s", got, msg)
	}
}

// TestReadableEveryKind: a ConfigMap (any kind but a Secret) keeps its
// data and its own annotations, and loses last-applied and managedFields;
// a Secret without secretData keeps exactly its allowlist.
func TestReadableEveryKind(t *testing.T) {
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "n", "resourceVersion": "3",
			"annotations":   map[string]any{corev1.LastAppliedConfigAnnotation: "{}", "a": "b"},
			"managedFields": []any{map[string]any{"manager": "m"}}},
		"data": map[string]any{"k": "v"}}
	readview.Readable(cm, false)
	want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"annotations":{"a":"b"},"name":"c","namespace":"n","resourceVersion":"3"}}`
	if got, _ := json.Marshal(cm); string(got) != want {
		t.Errorf("a ConfigMap read:\n got %s\nwant %s", got, want)
	}
	secret := leakSecrets("n")[0].Object
	readview.Readable(secret, false)
	want = `{"apiVersion":"v1","data":{"password":""},"kind":"Secret","metadata":{"labels":{"app":"db"},"name":"db-applied","namespace":"n","resourceVersion":"7"},"type":"Opaque"}`
	if got, _ := json.Marshal(secret); string(got) != want {
		t.Errorf("a Secret read without secretData:\n got %s\nwant %s", got, want)
	}
}
