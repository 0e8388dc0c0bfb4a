package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	cutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/view"
)

// Chart mode, proven equal to Helm's own renderer (issue 64, 3): every
// chart vendored in the repository is rendered, on each of its value sets,
// by stencil (a Set loaded from a config entry naming the chart,
// RenderHere: the chart package's executor, the child contract and the
// stamps) and by Helm's public API as `helm template` runs it
// (action.Install's client-only path, without the action: dependencies
// processed, values coalesced and checked against values.schema.json,
// engine.Engine{} with no cluster client and DNS off, NOTES.txt set aside,
// releaseutil.SortManifests). The two are compared:
//
//   - the objects to apply: the same objects in the same order (Helm's
//     install order), each equal field for field once both texts are
//     decoded as the API server would (view.DecodeObjects for Helm's text);
//   - the hooks and tests (Kind/name (events) from template), which
//     stencil lists and does not apply;
//   - the root chart's NOTES.txt (the Deployed condition's message);
//   - through the objects, the text Helm gives a function: the parity
//     chart's checksums of an included template, of toYaml and of toJson
//     of the tenant's values are Helm's bytes, not only equal YAML;
//   - or, when Helm fails, that stencil fails too with Helm's message.
//
// Normalised before the comparison, each because DESIGN.md ("Helm charts,
// unmodified") says stencil changes it, and each checked before it is set
// aside:
//
//   - metadata.ownerReferences: stencil adds exactly one, the controller
//     reference to the resource (checked equal to OwnerReference(parent));
//     Helm's objects carry none.
//   - metadata.labels app.kubernetes.io/managed-by and stencil.dev/owner-uid:
//     stencil's two labels, the first replacing the chart's own managed-by
//     ("Helm" from .Release.Service); checked to be "stencil" and the UID.
//     A labels map left empty is dropped on both sides.
//   - metadata.namespace: stencil places a child that names none in the
//     resource's namespace (checked); Helm's object is given the same. A
//     chart naming another namespace fails in stencil (not normalised).
//   - the values of ConfigMap data keys named "unordered-*" (the parity
//     chart's keys and values): Helm's keys and values follow Go's map
//     order, so Helm's output is any one of the orders; stencil's is the
//     sorted one (checked sorted), and the two are compared as sets. No
//     vendored chart prints keys or values into an object (bitnami's
//     common chart does in a fail message, compared the same way), range
//     and toYaml over maps are sorted in both, and so compared as they are.
//   - hook names that Helm itself renders differently on two renders
//     (podinfo names its test Pods with randAlphaNum): compared without
//     the name.
//
// Where the two differ by design (stencil's refusals: a function whose
// result differs per render, a cluster-scoped object, a tenant's text not
// run by tpl unless tenantTemplates), the value sets avoid it or the case
// says so; TestChartMatchesHelm fails on any other difference.

// parityCase is one chart rendered on one value set.
type parityCase struct {
	// chart is the chart's directory, relative to this package.
	chart string
	// name names the value set.
	name string
	// spec is the resource's spec, YAML, as a tenant writes it.
	spec string
	// tenantTemplates runs a tenant's text where the chart gives it to tpl,
	// as Helm does (stencil's default prints it as text).
	tenantTemplates bool
	// kubeVersion and apiVersions are the capabilities (empty: v1.37.0,
	// what bin/helm v4.3.1 assumes, chart/testdata/README.md; Helm's
	// library defaults to v1.20.0, which podinfo refuses).
	kubeVersion string
	apiVersions []string
	// upgrade renders the release as deployed before.
	upgrade bool
	// fails says Helm fails on these values: stencil must fail too.
	fails bool
}

// Where the vendored charts are.
var (
	chartTestdata  = filepath.Join("chart", "testdata")
	parityChart    = filepath.Join("testdata", "charts", "parity")
	anyValuesChart = filepath.Join("testdata", "charts", "anyvalues")
)

// parityCases lists every vendored chart with its default values and at
// least one set that turns its features on.
func parityCases(t *testing.T) []parityCase {
	t.Helper()
	cases := []parityCase{
		{chart: filepath.Join("..", "crds", "charts", "hello"), name: "defaults"},
		{chart: filepath.Join("..", "crds", "charts", "hello"), name: "features", spec: `
replicaCount: 3
image: {tag: "3.10"}
greeting: "bonjour, \"tout le monde\"\n\tà tous"
service: {type: NodePort, port: 8080}
config: {data: {b: two, a: one, "z.key": last}}
resources: {limits: {cpu: 100m, memory: 64Mi}}
podAnnotations: {prometheus.io/scrape: "true", example.com/a: "1"}
`},
		{chart: filepath.Join("..", "crds", "charts", "hello"), name: "config-off", spec: `config: {enabled: false}`},
		{chart: filepath.Join("..", "test", "hostile", "chart"), name: "defaults"},
		{chart: filepath.Join("..", "test", "hostile", "chart"), name: "features", tenantTemplates: true, spec: `
podAnnotations: {b: "2", a: "1", c: "x: y"}
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a, b]}]}]}}}
podLabels: "a: '{{ .Release.Name }}-label'"
`},
		{chart: filepath.Join("..", "test", "hostile", "chart"), name: "label-map", spec: `podLabels: {a: plain}`},
		{chart: parityChart, name: "defaults"},
		{chart: parityChart, name: "features", tenantTemplates: true, kubeVersion: "v1.29.3", apiVersions: []string{"example.com/v1"}, spec: `
global: {team: red}
greeting: "it's \"quoted\" \\ back\\slash\n\ttab é ✓ \u0007"
word: "no quote, but \"double\" ones, a \\ and é"
config: {k9: "9", k1: "1", k5: "5", k3: "3", k7: "7", k2: "2", k8: "8", k4: "4", k6: "6", k10: "10"}
nested: {deep: {list: [3, 2, 1], map: {b: {c: {d: {e: deep}}}, a: [{x: 1}, {y: 2}]}}, extra: null}
tplText: "{{ .Values.greeting | upper }} in {{ .Release.Namespace }}"
replicas: 4
big: 9007199254740993
ratio: 1.5e-7
depth: 20
podAnnotations: {z: last, a: first, "example.com/key": "v"}
sub: {enabled: true, message: "from the tenant"}
`},
		{chart: parityChart, name: "upgrade", upgrade: true, spec: `greeting: again`},
		{chart: parityChart, name: "required", fails: true, spec: `requiredValue: ""`},
		{chart: parityChart, name: "fail", fails: true, spec: `failWith: "stop: the tenant said so"`},
		{chart: parityChart, name: "include-loop", fails: true, spec: `depth: 1002`},
		{chart: anyValuesChart, name: "defaults"},
		{chart: anyValuesChart, name: "features", spec: `
scalar: {b: [1, 2.5, "x: y"], a: null}
list: [{z: 1, a: 2}, "- item", 9223372036854775807, 1e300, true, null]
map: {"k e y": "v\u00e9 \u2603", "ü": "\t", "#": "&a *a", "'": '"'}
`},
	}
	for _, c := range []string{"mychart", "nginx", "podinfo"} {
		sets, err := filepath.Glob(filepath.Join(chartTestdata, "values", c+"-*.yaml"))
		if err != nil || len(sets) < 2 {
			t.Fatalf("value sets of %s: %v (%d)", c, err, len(sets))
		}
		for _, f := range sets {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(f), ".yaml"), c+"-")
			// nginx-extras gives commonLabels and extraDeploy to tpl.
			cases = append(cases, parityCase{chart: filepath.Join(chartTestdata, "charts", c), name: name, spec: string(data), tenantTemplates: true})
		}
	}
	prod, err := os.ReadFile(filepath.Join(chartTestdata, "charts", "podinfo", "values-prod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		parityCase{chart: filepath.Join(chartTestdata, "charts", "podinfo"), name: "values-prod", spec: string(prod)},
		// bitnami's common.resources.preset fails naming the presets by
		// keys, in map order in Helm.
		parityCase{chart: filepath.Join(chartTestdata, "charts", "nginx"), name: "bad-preset", fails: true,
			spec: "tls: {existingSecret: demo-tls}\nresourcesPreset: enormous\n"},
	)
	return cases
}

// TestChartsAreAllCovered fails when a chart is vendored that
// TestChartMatchesHelm does not render.
func TestChartsAreAllCovered(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range parityCases(t) {
		covered[filepath.Clean(c.chart)] = true
	}
	for _, root := range []string{filepath.Join("..", "crds"), filepath.Join("..", "test"), "."} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "integration" || d.Name() == "fuzz") {
				return filepath.SkipDir
			}
			if d.Name() != "Chart.yaml" {
				return nil
			}
			dir := filepath.Dir(p)
			if filepath.Base(filepath.Dir(dir)) == "charts" && isSubchart(dir) {
				return nil
			}
			if !covered[filepath.Clean(dir)] {
				t.Errorf("chart %s is vendored but not compared with Helm: add its value sets to parityCases", dir)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// isSubchart says whether dir is vendored under a chart's charts/.
func isSubchart(dir string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(dir)), "Chart.yaml"))
	return err == nil
}

// TestChartMatchesHelm renders each case with stencil and with Helm and
// compares them (see the comment at the top of this file).
func TestChartMatchesHelm(t *testing.T) {
	charts := map[string]bool{}
	var sets, objects, hooks, notes, failures, columns int
	for _, c := range parityCases(t) {
		label := filepath.Base(c.chart)
		if label == "chart" {
			label = filepath.Base(filepath.Dir(c.chart))
		}
		t.Run(label+"/"+c.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(c.spec), &spec); err != nil {
				t.Fatal(err)
			}
			r := compareWithHelm(t, c, specOf(t, spec))
			charts[c.chart] = true
			sets++
			objects += r.objects
			hooks += r.hooks
			if r.notes {
				notes++
			}
			if r.failed {
				failures++
			}
			if r.columns {
				columns++
				t.Logf("the error names another column than Helm's (an earlier action on the line was rewritten longer): %s", c.name)
			}
		})
	}
	t.Logf("compared with Helm's engine: %d charts, %d chart × value set cases: %d objects, %d hooks, %d NOTES.txt equal; %d cases failing alike in both (%d naming another column)",
		len(charts), sets, objects, hooks, notes, failures, columns)
}

// specOf gives a spec as the controller holds one: read through JSON,
// numbers int64, or float64 when not whole (view.CopyJSONValue).
func specOf(t testing.TB, spec map[string]any) map[string]any {
	t.Helper()
	if spec == nil {
		return nil
	}
	out, ok := specOfNoFail(spec)
	if !ok {
		t.Fatalf("spec %v cannot be held as JSON", spec)
	}
	return out
}

// specOfNoFail is specOf, false where JSON cannot hold spec (a NaN).
func specOfNoFail(spec map[string]any) (map[string]any, bool) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, false
	}
	var v map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	out, err := view.CopyJSONValue(v)
	if err != nil {
		return nil, false
	}
	m, ok := out.(map[string]any)
	return m, ok
}

// parityResult is what one comparison counted; columns says the error
// messages differ in a column alone.
type parityResult struct {
	objects, hooks         int
	notes, failed, columns bool
}

// errorColumn is the column of "template:line:column: " in an error: the
// rewrite keeps each action on its line and, where the line allows, at
// its column, but an action after another on the same line, which the
// rewrite made longer, starts further right (docs/charts.md).
var errorColumn = regexp.MustCompile(`:(\d+):\d+: `)

// compareWithHelm renders c with spec both ways and reports every
// difference as a test error.
func compareWithHelm(t testing.TB, c parityCase, spec map[string]any) parityResult {
	t.Helper()
	got, serr, want, herr, parent := renderBoth(t, c, spec)
	switch {
	case herr != nil && serr != nil:
		r := parityResult{failed: true}
		smsg, hmsg := sortLists(serr.Error()), sortLists(herr.Error())
		if !strings.Contains(smsg, hmsg) {
			smsg, hmsg = errorColumn.ReplaceAllString(smsg, ":$1:"), errorColumn.ReplaceAllString(hmsg, ":$1:")
			if !strings.Contains(smsg, hmsg) {
				t.Errorf("both fail, with another message:\nstencil: %v\nhelm:    %v", serr, herr)
			}
			r.columns = true
		}
		if !c.fails {
			t.Errorf("both fail: %v", herr)
		}
		return r
	case herr != nil:
		t.Fatalf("helm fails and stencil renders: %v", herr)
	case serr != nil:
		t.Fatalf("stencil fails and helm renders: %v", serr)
	case c.fails:
		t.Fatalf("both render; the case expects them to fail")
	}
	return compareOutputs(t, got, want, parent)
}

// renderBoth renders c with spec with stencil and with Helm.
func renderBoth(t testing.TB, c parityCase, spec map[string]any) (got *Result, serr error, want *helmOutput, herr error, parent *view.Object) {
	t.Helper()
	if c.kubeVersion == "" {
		c.kubeVersion = "v1.37.0"
	}
	caps, err := OfflineCapabilities(c.kubeVersion, c.apiVersions)
	if err != nil {
		t.Fatal(err)
	}
	set := paritySet(t, c, caps)
	parent = parityParent(t, set, spec, c.upgrade)
	got, serr = set.RenderHere(parent, nil, nil)
	want, herr = helmRender(c, spec, caps)
	return got, serr, want, herr, parent
}

// compareOutputs reports every difference between stencil's render and
// Helm's as a test error.
func compareOutputs(t testing.TB, got *Result, want *helmOutput, parent *view.Object) parityResult {
	t.Helper()
	var gotKeys, wantKeys []string
	gotObjs, wantObjs := map[string]any{}, map[string]any{}
	for _, u := range got.Children {
		k := objectKey(u)
		gotKeys = append(gotKeys, k)
		gotObjs[k] = normaliseStencil(t, u, parent)
	}
	for _, u := range want.objects {
		k := objectKey(u)
		wantKeys = append(wantKeys, k)
		wantObjs[k] = normaliseHelm(t, u, parent)
	}
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("objects differ:\nstencil: %s\nhelm:    %s", strings.Join(gotKeys, ", "), strings.Join(wantKeys, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(wantObjs)) {
		g, ok := gotObjs[k]
		if !ok {
			continue
		}
		if !reflect.DeepEqual(g, wantObjs[k]) {
			gj, _ := json.MarshalIndent(g, "", "  ")
			wj, _ := json.MarshalIndent(wantObjs[k], "", "  ")
			t.Errorf("%s differs:\nstencil:\n%s\nhelm:\n%s", k, gj, wj)
		}
	}
	gotHooks := slices.Clone(got.Hooks)
	for i, h := range want.randomHooks {
		if h && i < len(gotHooks) {
			gotHooks[i] = maskHookName(gotHooks[i])
		}
	}
	if !slices.Equal(gotHooks, want.hooks) {
		t.Errorf("hooks differ:\nstencil: %q\nhelm:    %q", gotHooks, want.hooks)
	}
	if got.Notes != want.notes {
		t.Errorf("NOTES.txt differs:\nstencil: %q\nhelm:    %q", got.Notes, want.notes)
	}
	return parityResult{objects: len(wantObjs), hooks: len(want.hooks), notes: want.notes != ""}
}

// sortLists sorts the items of an "Allowed values are a,b,c" list in an
// error message: bitnami's common chart prints keys of a map there.
func sortLists(msg string) string {
	const marker = "Allowed values are "
	before, after, ok := strings.Cut(msg, marker)
	if !ok {
		return msg
	}
	list, rest, _ := strings.Cut(after, " ")
	items := strings.Split(list, ",")
	slices.Sort(items)
	return before + marker + strings.Join(items, ",") + " " + rest
}

// paritySets caches the sets of the cases: loading nginx's is slow.
var paritySets sync.Map

// paritySet loads the chart of c as a config entry would name it.
func paritySet(t testing.TB, c parityCase, caps *common.Capabilities) *Set {
	t.Helper()
	key := fmt.Sprintf("%s %t %s %v", c.chart, c.tenantTemplates, c.kubeVersion, c.apiVersions)
	if s, ok := paritySets.Load(key); ok {
		return s.(*Set)
	}
	dir, err := filepath.Abs(c.chart)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir, err := os.MkdirTemp("", "parity")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(cfgDir)
	text := fmt.Sprintf("resources:\n  - group: charts.example.org\n    version: v1\n    resource: parities\n    chart: %s\n    tenantTemplates: %t\n", dir, c.tenantTemplates)
	cfgPath := filepath.Join(cfgDir, "stencil.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(cfg, cfg.Resources[0], Options{Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	paritySets.Store(key, s)
	return s
}

// parityParent is the resource a case renders for: release demo in
// team-a, deployed before when upgrade.
func parityParent(t testing.TB, set *Set, spec map[string]any, upgrade bool) *view.Object {
	t.Helper()
	obj := map[string]any{"apiVersion": "charts.example.org/v1", "kind": "Parity",
		"metadata": map[string]any{"name": "demo", "namespace": "team-a", "uid": "5d1c1f3e-0000-4000-8000-000000000001", "generation": int64(1)}}
	if spec != nil {
		obj["spec"] = runtime.DeepCopyJSON(spec)
	}
	if upgrade {
		obj["status"] = map[string]any{"conditions": []any{map[string]any{"type": contract.ConditionDeployed, "status": "True"}}}
	}
	p, err := view.NewObject(&unstructured.Unstructured{Object: obj}, set.Resource().GVR())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helmOutput is what helm template renders.
type helmOutput struct {
	objects []*unstructured.Unstructured
	// hooks are as stencil names them: "Kind/name (events) from template";
	// randomHooks marks those whose name differs between two renders.
	hooks       []string
	randomHooks []bool
	notes       string
}

// helmRender renders c with spec as `helm template` does, twice, to tell
// the hooks whose names are random.
func helmRender(c parityCase, spec map[string]any, caps *common.Capabilities) (*helmOutput, error) {
	out, err := helmRenderOnce(c, spec, caps)
	if err != nil {
		return nil, err
	}
	again, err := helmRenderOnce(c, spec, caps)
	if err != nil {
		return nil, fmt.Errorf("the second render: %w", err)
	}
	if len(again.hooks) != len(out.hooks) {
		return nil, fmt.Errorf("helm renders %d hooks, then %d", len(out.hooks), len(again.hooks))
	}
	out.randomHooks = make([]bool, len(out.hooks))
	for i := range out.hooks {
		if out.hooks[i] != again.hooks[i] {
			out.randomHooks[i] = true
			out.hooks[i] = maskHookName(out.hooks[i])
		}
	}
	return out, nil
}

// maskHookName cuts the name out of "Kind/name (events) from template".
func maskHookName(h string) string {
	kind, rest, _ := strings.Cut(h, "/")
	_, rest, _ = strings.Cut(rest, " (")
	return kind + "/<random> (" + rest
}

// helmRenderOnce is action.Install's client-only render (`helm template`),
// from Helm's public packages.
func helmRenderOnce(c parityCase, spec map[string]any, caps *common.Capabilities) (*helmOutput, error) {
	loaded, err := loader.Load(c.chart)
	if err != nil {
		return nil, err
	}
	ch := loaded.(*chartv2.Chart)
	vals := map[string]any{}
	if spec != nil {
		vals = runtime.DeepCopyJSON(spec)
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}
	opts := common.ReleaseOptions{Name: "demo", Namespace: "team-a", Revision: 1, IsInstall: !c.upgrade, IsUpgrade: c.upgrade}
	if c.upgrade {
		opts.Revision = 2
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	top, err := cutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, err
	}
	var e engine.Engine
	files, err := e.Render(ch, top)
	if err != nil {
		return nil, err
	}
	out := &helmOutput{}
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if name == path.Join(ch.Name(), "templates", "NOTES.txt") {
				out.notes = strings.TrimSpace(text)
			}
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	for _, h := range hooks {
		events := make([]string, len(h.Events))
		for i, ev := range h.Events {
			events[i] = ev.String()
		}
		out.hooks = append(out.hooks, fmt.Sprintf("%s/%s (%s) from %s", h.Kind, h.Name, strings.Join(events, ","), h.Path))
	}
	for _, m := range manifests {
		objs, err := view.DecodeObjects([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", m.Name, err)
		}
		out.objects = append(out.objects, objs...)
	}
	return out, nil
}

// objectKey names an object: apiVersion, kind and name.
func objectKey(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + " " + u.GetKind() + " " + u.GetName()
}

// normaliseStencil checks stencil's stamps on u and sets them aside.
func normaliseStencil(t testing.TB, u *unstructured.Unstructured, parent *view.Object) any {
	t.Helper()
	u = u.DeepCopy()
	k := objectKey(u)
	if refs := u.GetOwnerReferences(); len(refs) != 1 || !reflect.DeepEqual(refs[0], OwnerReference(parent)) {
		t.Errorf("%s: ownerReferences %v, want the resource's controller reference alone", k, refs)
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
	if ns := u.GetNamespace(); ns != parent.Namespace {
		t.Errorf("%s: namespace %q, want the resource's %q", k, ns, parent.Namespace)
	}
	lbls := u.GetLabels()
	if lbls[contract.LabelManagedBy] != contract.ManagedByValue || lbls[contract.LabelOwnerUID] != parent.UID {
		t.Errorf("%s: labels %v, want stencil's two", k, lbls)
	}
	delete(lbls, contract.LabelManagedBy)
	delete(lbls, contract.LabelOwnerUID)
	setLabels(u, lbls)
	return canonical(t, u, true)
}

// normaliseHelm sets aside what stencil changes by design in Helm's u.
func normaliseHelm(t testing.TB, u *unstructured.Unstructured, parent *view.Object) any {
	t.Helper()
	u = u.DeepCopy()
	if u.GetNamespace() == "" {
		u.SetNamespace(parent.Namespace)
	}
	lbls := u.GetLabels()
	delete(lbls, contract.LabelManagedBy)
	setLabels(u, lbls)
	return canonical(t, u, false)
}

func setLabels(u *unstructured.Unstructured, lbls map[string]string) {
	if len(lbls) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		return
	}
	u.SetLabels(lbls)
}

// stencilOrder is what stencil prints for the parity chart's
// unordered-keys (the keys sorted) and unordered-values (the values in the
// order of their sorted keys, nil ones left out as join leaves them), from
// its cfg-KEY entries (range, sorted in both).
func stencilOrder(field string, data map[string]string) string {
	var keys []string
	for k := range data {
		if name, ok := strings.CutPrefix(k, "cfg-"); ok {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	if field == "unordered-values" {
		var vals []string
		for _, k := range keys {
			// join skips a nil value, which toString prints <nil>.
			if v := data["cfg-"+k]; v != "<nil>" {
				vals = append(vals, v)
			}
		}
		return strings.Join(vals, ",")
	}
	return strings.Join(keys, ",")
}

// canonical is u through JSON (numbers as json.Number, so that 3 and 3.0
// print alike and big integers stay exact), with the "unordered-*" data
// of a ConfigMap sorted (stencil's checked to be in its order first).
func canonical(t testing.TB, u *unstructured.Unstructured, stencil bool) any {
	t.Helper()
	if u.GetKind() == "ConfigMap" {
		data, _, _ := unstructured.NestedStringMap(u.Object, "data")
		for k, v := range data {
			if !strings.HasPrefix(k, "unordered-") {
				continue
			}
			items := strings.Split(v, ",")
			if stencil && v != stencilOrder(k, data) {
				t.Errorf("%s: data %s is %q, want %q (stencil's order)", objectKey(u), k, v, stencilOrder(k, data))
			}
			slices.Sort(items)
			data[k] = strings.Join(items, ",")
		}
		if data != nil {
			_ = unstructured.SetNestedStringMap(u.Object, data, "data")
		}
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
