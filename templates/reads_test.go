package templates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/readview"
)

// fakeReads is a ReadSource over a list of objects; it records the
// namespaces it was asked about.
type fakeReads struct {
	objs   []*unstructured.Unstructured
	served map[schema.GroupKind]bool
	asked  []string
}

func (f *fakeReads) Get(rd config.Read, ns, name string) (*unstructured.Unstructured, error) {
	f.asked = append(f.asked, rd.Kind+" "+ns+"/"+name)
	for _, u := range f.objs {
		if u.GroupVersionKind() == rd.GVK() && u.GetNamespace() == ns && u.GetName() == name {
			return u, nil
		}
	}
	return nil, nil
}

func (f *fakeReads) List(rd config.Read, ns string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	f.asked = append(f.asked, rd.Kind+" "+ns+"/"+sel.String())
	var out []*unstructured.Unstructured
	for _, u := range f.objs {
		if u.GroupVersionKind() == rd.GVK() && u.GetNamespace() == ns && sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (f *fakeReads) Served(gk schema.GroupKind) bool { return f.served[gk] }

func readObject(apiVersion, kind, ns, name string, lbls map[string]any, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "7", "generation": int64(3), "labels": lbls,
			"managedFields": []any{map[string]any{"manager": "kubectl"}}}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// readsConfig is an entry with the three kinds of read the design names.
const readsConfig = `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    kind: WebApp
    schema: {spec: {image: string, passwordSecret: string, tier: string}}
    children: [{apiVersion: v1, kind: ConfigMap}]
    templates: [cm.tmpl]
    reads:
      - {name: defaults, apiVersion: v1, kind: ConfigMap, objectName: platform-defaults, namespace: stencil-system}
      - {name: password, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.passwordSecret }}", required: true}
      - name: peers
        apiVersion: apps.example.com/v1beta1
        kind: WebApp
        selector: {matchLabels: {tier: "{{ .Spec.tier }}"}}
`

func loadReadsSet(t testing.TB, tmpl string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseConfig(filepath.Join(dir, "stencil.yaml"), []byte(readsConfig))
	if err != nil {
		t.Fatal(err)
	}
	return Load(cfg, cfg.Resources[0], Options{})
}

// TestReadsResolveAndRender: a fixed read in another namespace, a Secret
// the tenant names (key names, never data), and peers by a computed
// selector (sorted, without their status): what the template prints,
// what status.reads would list, and what a missing required read says.
func TestReadsResolveAndRender(t *testing.T) {
	s, err := loadReadsSet(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  region: {{ (read "defaults").data.region }}
  keys: {{ keys (read "password").data | sortAlpha | join "," }}
  password: "{{ (read "password").data.password }}"
  peers: {{ range (read "peers") }}{{ .metadata.name }}{{ if hasKey . "status" }}+status{{ end }} {{ end }}
`)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeReads{served: map[schema.GroupKind]bool{{Group: "apps.example.com", Kind: "WebApp"}: true}, objs: []*unstructured.Unstructured{
		readObject("v1", "ConfigMap", "stencil-system", "platform-defaults", nil, map[string]any{"data": map[string]any{"region": "eu-west-1"}}),
		readObject("v1", "ConfigMap", "team-a", "platform-defaults", nil, map[string]any{"data": map[string]any{"region": "tenant's own"}}),
		readObject("v1", "Secret", "team-a", "db-pass", nil, map[string]any{"type": "Opaque", "data": map[string]any{"password": "c2VjcmV0", "user": "YWRtaW4="}}),
		readObject("v1", "Secret", "other", "db-pass", nil, map[string]any{"data": map[string]any{"other": "eA=="}}),
		readObject("apps.example.com/v1beta1", "WebApp", "team-a", "zeta", map[string]any{"tier": "gold"}, map[string]any{"status": map[string]any{"ready": true}}),
		readObject("apps.example.com/v1beta1", "WebApp", "team-a", "alpha", map[string]any{"tier": "gold"}, nil),
		readObject("apps.example.com/v1beta1", "WebApp", "team-a", "beta", map[string]any{"tier": "silver"}, nil),
	}}
	p := parent()
	p.Spec = map[string]any{"image": "nginx", "passwordSecret": "db-pass", "tier": "gold"}
	reads, err := s.ResolveReads(p, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(reads.Missing) != 0 {
		t.Fatalf("missing: %v", reads.Missing)
	}
	var refs []string
	for _, r := range reads.Refs {
		refs = append(refs, fmt.Sprintf("%s@%s#%d", r, r.ResourceVersion, r.Generation))
	}
	// A kind stencil serves is named by generation: its resourceVersion
	// changes with each status patch, which a read does not see.
	want := []string{"ConfigMap stencil-system/platform-defaults@7#0", "Secret team-a/db-pass@7#0", "WebApp team-a/alpha@#3", "WebApp team-a/zeta@#3"}
	if !slices.Equal(refs, want) {
		t.Fatalf("refs = %v, want %v", refs, want)
	}
	p.Reads = reads.Values
	r, err := s.RenderHere(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := r.Children[0].Object["data"].(map[string]any)
	for k, v := range map[string]string{"region": "eu-west-1", "keys": "password,user", "password": "", "peers": "alpha zeta"} {
		if got := strings.TrimSpace(data[k].(string)); got != v {
			t.Errorf("data.%s = %q, want %q", k, got, v)
		}
	}
	text := strings.Join([]string{data["password"].(string), data["keys"].(string)}, " ")
	if strings.Contains(text, "c2VjcmV0") || strings.Contains(text, "secret") {
		t.Errorf("a Secret read without secretData printed its data: %q", text)
	}
	md := reads.Values["defaults"].(map[string]any)["metadata"].(map[string]any)
	if _, ok := md["resourceVersion"]; ok {
		t.Errorf("a read's view keeps resourceVersion, which changes on every write: %v", md)
	}

	// The tenant names a Secret that does not exist: the required read
	// is missing, and only the resource's namespace was asked.
	p.Spec["passwordSecret"] = "nope"
	src.asked = nil
	reads, err = s.ResolveReads(p, src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reads.Missing, []string{"Secret team-a/nope"}) {
		t.Errorf("missing = %v, want [Secret team-a/nope]", reads.Missing)
	}
	for _, a := range src.asked {
		if strings.HasPrefix(a, "Secret ") && !strings.HasPrefix(a, "Secret team-a/") {
			t.Errorf("a computed read asked outside the resource's namespace: %s", a)
		}
	}
	// No name at all (the field unset) is missing too, and asks nothing.
	delete(p.Spec, "passwordSecret")
	if reads, err = s.ResolveReads(p, src); err != nil || len(reads.Missing) != 1 {
		t.Fatalf("unset name: missing = %v, %v", reads.Missing, err)
	}
}

// TestReadSecretDataOnlyWhenDeclared: secretData shows the data.
func TestReadSecretDataOnlyWhenDeclared(t *testing.T) {
	u := readObject("v1", "Secret", "team-a", "s", nil, map[string]any{"data": map[string]any{"k": "dg=="}, "stringData": map[string]any{"k": "v"}})
	closed := readview.View(u, config.Read{APIVersion: "v1", Kind: "Secret"}, false)
	if closed["data"].(map[string]any)["k"] != "" || closed["stringData"] != nil {
		t.Errorf("without secretData: %v", closed)
	}
	open := readview.View(u, config.Read{APIVersion: "v1", Kind: "Secret", SecretData: true}, false)
	if open["data"].(map[string]any)["k"] != "dg==" {
		t.Errorf("with secretData: %v", open)
	}
	if u.Object["data"].(map[string]any)["k"] != "dg==" {
		t.Errorf("ReadView changed the cache's object")
	}
}

// TestReadUndeclaredHandle: a template that reads a handle the entry does
// not declare is refused at load, naming the file and the handle.
func TestReadUndeclaredHandle(t *testing.T) {
	_, err := loadReadsSet(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data: {x: {{ (read "secrets").data }}}
`)
	if err == nil || !strings.Contains(err.Error(), `read "secrets"`) || !strings.Contains(err.Error(), "templates[0]") {
		t.Fatalf("err = %v, want the undeclared handle refused at templates[0]", err)
	}
}

// TestReadValueIsData: a read object's string holding YAML syntax lands
// as one scalar, as a spec string does.
func TestReadValueIsData(t *testing.T) {
	s, err := loadReadsSet(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  region: {{ (read "defaults").data.region }}
`)
	if err != nil {
		t.Fatal(err)
	}
	hostile := "x\n  injected: true\nmetadata: {name: evil}"
	src := &fakeReads{objs: []*unstructured.Unstructured{
		readObject("v1", "ConfigMap", "stencil-system", "platform-defaults", nil, map[string]any{"data": map[string]any{"region": hostile}}),
		readObject("v1", "Secret", "team-a", "db-pass", nil, nil),
	}}
	p := parent()
	p.Spec = map[string]any{"passwordSecret": "db-pass"}
	reads, err := s.ResolveReads(p, src)
	if err != nil {
		t.Fatal(err)
	}
	p.Reads = reads.Values
	r, err := s.RenderHere(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := r.Children[0].Object["data"].(map[string]any)
	if len(data) != 1 || data["region"] != hostile || r.Children[0].GetName() != "demo" {
		t.Fatalf("a read value became structure: %v", r.Children[0].Object)
	}
}

// TestChartLookupAnswersFromReads: Helm's lookup finds a declared read's
// object, and nothing else; what it returns is the tenant's (tainted).
func TestChartLookupAnswersFromReads(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: look\nversion: 0.1.0\n",
		"chart/values.yaml": "{}\n",
		"chart/templates/cm.yaml": `{{- $s := lookup "v1" "Secret" .Release.Namespace "db-pass" }}
{{- $other := lookup "v1" "Secret" "kube-system" "admin" }}
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}}
data:
  found: {{ if $s }}"yes"{{ else }}"no"{{ end }}
  password: {{ if $s }}{{ $s.data.password | quote }}{{ else }}"none"{{ end }}
  other: {{ if $other }}"leaked"{{ else }}"none"{{ end }}
  listed: {{ len (lookup "v1" "Secret" .Release.Namespace "").items | quote }}
`,
		"chart/templates/tpl.yaml": `{{- $c := lookup "v1" "ConfigMap" .Release.Namespace "cfg" }}
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-tpl}
data:
  text: {{ if $c }}{{ tpl $c.data.text . | quote }}{{ else }}"none"{{ end }}
`,
		"stencil.yaml": `resources:
  - group: apps.example.com
    version: v1
    resource: looks
    chart: chart
    children: [{apiVersion: v1, kind: ConfigMap}]
    overrideValues: {secret: platform-password}
    reads:
      - {name: existing, apiVersion: v1, kind: Secret, objectName: db-pass, secretData: true}
      - {name: cfg, apiVersion: v1, kind: ConfigMap, objectName: cfg}
`,
	}
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
	s, err := Load(cfg, cfg.Resources[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	var renderAll func(objs ...*unstructured.Unstructured) []*unstructured.Unstructured
	render := func(objs ...*unstructured.Unstructured) map[string]any {
		t.Helper()
		return renderAll(objs...)[0].Object["data"].(map[string]any)
	}
	renderAll = func(objs ...*unstructured.Unstructured) []*unstructured.Unstructured {
		t.Helper()
		p := parent()
		p.Spec = map[string]any{}
		reads, err := s.ResolveReads(p, &fakeReads{objs: objs})
		if err != nil {
			t.Fatal(err)
		}
		p.Reads = reads.Values
		r, err := s.RenderHere(p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Children
	}
	admin := readObject("v1", "Secret", "kube-system", "admin", nil, map[string]any{"data": map[string]any{"password": "cm9vdA=="}})
	without := render(admin)
	if without["found"] != "no" || without["other"] != "none" || without["listed"] != "0" {
		t.Errorf("without the Secret: %v", without)
	}
	with := render(admin, readObject("v1", "Secret", "team-a", "db-pass", nil, map[string]any{"data": map[string]any{"password": "c2VjcmV0"}}))
	if with["found"] != "yes" || with["password"] != "c2VjcmV0" || with["other"] != "none" || with["listed"] != "1" {
		t.Errorf("with the Secret: %v", with)
	}

	// A read object's text is the tenant's (any tenant may write the
	// ConfigMap a read names): tpl prints it, it does not run it.
	children := renderAll(readObject("v1", "ConfigMap", "team-a", "cfg", nil, map[string]any{"data": map[string]any{"text": "{{ .Values.secret }}"}}))
	for _, c := range children {
		if strings.Contains(fmt.Sprint(c.Object), "platform-password") {
			t.Errorf("a looked-up object's text ran as a template and printed the platform's value: %v", c.Object)
		}
		if c.GetName() == "demo-tpl" && c.Object["data"].(map[string]any)["text"] != "{{ .Values.secret }}" {
			t.Errorf("tpl of a looked-up text: %v, want the text as it is", c.Object["data"])
		}
	}
}

// TestReadsLiveSeesChains: a template that reads a live child only inside
// a chain, (observed ...).spec, reads live children.
func TestReadsLiveSeesChains(t *testing.T) {
	s := loadSet(t, Options{}, "d.tmpl", "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Name }}}\nspec: {clusterIP: {{ (observed \"Service\" \"db\").spec.clusterIP }}}\n")
	if !s.ReadsLive() {
		t.Error("a template calling observed inside a chain does not count as reading live children")
	}
}

// failingReads is a ReadSource whose every answer fails, as a read kind's
// watch that has not listed does.
type failingReads struct{ *fakeReads }

func (failingReads) Get(config.Read, string, string) (*unstructured.Unstructured, error) {
	return nil, errors.New("the watch has not listed")
}

// TestRenderReadingResolvesWaitsOrRenders: the one "resolve the reads,
// wait or render" of the controller and RenderOffline. The reads are
// told to resolved before anything renders, also when a required one is
// missing (then nothing renders); a failure to read is a *ReadError; the
// render sees what the reads found.
func TestRenderReadingResolvesWaitsOrRenders(t *testing.T) {
	s, err := loadReadsSet(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  region: {{ (read "defaults").data.region }}
`)
	if err != nil {
		t.Fatal(err)
	}
	defaults := readObject("v1", "ConfigMap", "stencil-system", "platform-defaults", nil, map[string]any{"data": map[string]any{"region": "eu-west-1"}})
	secret := readObject("v1", "Secret", "team-a", "db-pass", nil, map[string]any{"data": map[string]any{"password": "c2VjcmV0"}})
	p := parent()
	p.Spec = map[string]any{"passwordSecret": "db-pass", "tier": "gold"}

	var told *Reads
	r, reads, err := s.RenderReading(p, &fakeReads{objs: []*unstructured.Unstructured{defaults}}, nil, func(found *Reads) { told = found })
	if err != nil || r != nil || reads == nil || !slices.Equal(reads.Missing, []string{"Secret team-a/db-pass"}) {
		t.Fatalf("a required read missing: result %v, reads %+v, err %v; want no result, the read missing", r, reads, err)
	}
	if told != reads || len(told.Targets) != 3 {
		t.Errorf("resolved was told %+v, want the reads and their 3 targets", told)
	}

	r, reads, err = s.RenderReading(p, &fakeReads{objs: []*unstructured.Unstructured{defaults, secret}}, nil, nil)
	if err != nil || r == nil || len(reads.Refs) != 2 {
		t.Fatalf("every read found: result %v, reads %+v, err %v", r, reads, err)
	}
	if got := r.Children[0].Object["data"].(map[string]any)["region"]; got != "eu-west-1" {
		t.Errorf("the render saw region %v, want eu-west-1", got)
	}

	told = nil
	_, reads, err = s.RenderReading(p, failingReads{&fakeReads{}}, nil, func(found *Reads) { told = found })
	var readErr *ReadError
	if !errors.As(err, &readErr) || reads != nil || told != nil || !strings.Contains(err.Error(), "the watch has not listed") {
		t.Errorf("a read that fails: reads %+v, told %+v, err %v; want a *ReadError and nothing told", reads, told, err)
	}
}

// TestReadTemplatesParsedOnce: a computed read name or label value is
// parsed once per load, by the config's validation; the set runs that
// very template.
func TestReadTemplatesParsedOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.tmpl"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseConfig(filepath.Join(dir, "stencil.yaml"), []byte(readsConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(cfg, cfg.Resources[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"reads[1].objectName", "reads[2].selector.matchLabels[tier]"} {
		parsed, ok := cfg.ReadTemplate(0, key)
		if !ok || s.readTemplates[key] != parsed {
			t.Errorf("%s: the set's template is not the one the config parsed", key)
		}
	}
	if len(s.readTemplates) != 2 {
		t.Errorf("the set holds %d read templates, want the 2 computed values", len(s.readTemplates))
	}
}
