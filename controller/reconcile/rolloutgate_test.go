package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/apimachinery/pkg/types"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/templates"
)

// onRevision returns parent as the controller leaves it once moved to the
// templates of the config at path: its status names their revision.
func onRevision(t *testing.T, path string, parent *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cfg, err := config.Load(path)
	must(t, err)
	sets, err := templates.LoadAll(cfg, templates.Options{})
	must(t, err)
	parent = parent.DeepCopy()
	must(t, unstructured.SetNestedField(parent.Object, sets[0].Revision(), "status", contract.StatusTemplateRevision))
	return parent
}

// syncActions runs one sync of name on f's controller (built once) and
// returns the API actions it made, lists and watches aside.
func (f *fixture) syncActions(ctx context.Context, name string) []string {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.sync(ctx, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, describe([]core.Action{a})...)
		}
	}
	return out
}

// TestRolloutReadsItsStateFromTheCaches: three converged WebApps whose
// children were rendered without a rollout, under a config with
// rollout {maxInFlight: 1, maxFailed: 1}. The first to sync moves; the
// others are left alone, not even their status written. A new controller
// (a restart) whose caches show the moved one's children on the new
// revision and Ready lets the next one move, and one only; once that one's
// Deployment is past its progress deadline, the rollout halts.
func TestRolloutReadsItsStateFromTheCaches(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	spec := map[string]any{"image": "nginx:1.27", "replicas": int64(1), "port": int64(80)}
	var parents []*unstructured.Unstructured
	var children [][]*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c"} {
		p, ch := converged(t, webapp(name, spec))
		parents, children = append(parents, p), append(children, ch)
	}
	f := newFixture(t)
	f.config = "testdata/stencil-rollout.yaml"
	f.cache = append(f.cache, parents...)
	for _, ch := range children {
		f.cache = append(f.cache, ch...)
	}
	f.newReconciler(ctx)
	// The config adds a rollout and changes no render: a moves with one
	// status patch (the revision it is on), and no child is written.
	if got := f.syncActions(ctx, "a"); len(got) != 1 || got[0] != "patch webapps/status a" {
		t.Fatalf("a, the first to sync, moved with %v; want one status patch", got)
	}
	for _, name := range []string{"b", "c"} {
		if got := f.syncActions(ctx, name); len(got) != 0 {
			t.Fatalf("%s moved or was written while a rolls (maxInFlight 1): %v", name, got)
		}
	}
	if got := f.syncActions(ctx, "b"); len(got) != 0 {
		t.Fatalf("b moved on a second sync while a rolls: %v", got)
	}

	// A restart: the caches show a's children on the new revision, Ready.
	f = newFixture(t)
	f.config = "testdata/stencil-rollout.yaml"
	f.cache = append(f.cache, onRevision(t, f.config, parents[0]), parents[1], parents[2])
	f.cache = append(f.cache, renderedWith(t, f.config, parents[0])...)
	f.cache = append(f.cache, children[1]...)
	f.cache = append(f.cache, children[2]...)
	f.newReconciler(ctx)
	moved := f.syncActions(ctx, "b")
	if len(moved) == 0 {
		t.Fatal("b did not move once a was Ready on the new revision")
	}
	if got := f.syncActions(ctx, "c"); len(got) != 0 {
		t.Fatalf("c moved while b rolls: %v", got)
	}

	// b's Deployment on the new revision fails: the rollout halts, c waits.
	f = newFixture(t)
	f.config = "testdata/stencil-rollout.yaml"
	f.cache = append(f.cache, onRevision(t, f.config, parents[0]), onRevision(t, f.config, parents[1]), parents[2])
	f.cache = append(f.cache, renderedWith(t, f.config, parents[0])...)
	for _, ch := range renderedWith(t, f.config, parents[1]) {
		if ch.GetKind() == "Deployment" {
			must(t, unstructured.SetNestedSlice(ch.Object, []any{
				map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"},
			}, "status", "conditions"))
		}
		f.cache = append(f.cache, ch)
	}
	f.cache = append(f.cache, children[2]...)
	f.newReconciler(ctx)
	if got := f.syncActions(ctx, "c"); len(got) != 0 {
		t.Fatalf("c moved after b failed (maxFailed 1): %v", got)
	}
	expectEvent(t, f.recorder, "Warning RolloutHalted Rollout of webapps.v1beta1.apps.example.com to template revision")
	if got := gaugeValue(t, f.c.opts.Metrics.rolloutHalted.WithLabelValues("webapps.apps.example.com")); got != 1 {
		t.Errorf("stencil_rollout_halted = %v, want 1", got)
	}
	for state, want := range map[string]float64{"pending": 1, "rolling": 0, "done": 1, "failed": 1} {
		if got := gaugeValue(t, f.c.opts.Metrics.rolloutResources.WithLabelValues("webapps.apps.example.com", state)); got != want {
			t.Errorf("stencil_rollout_resources{state=%q} = %v, want %v", state, got, want)
		}
	}
}

// rolloutConfigs writes two rollout configs beside a copy of the test
// templates: old, and next, whose Deployment template alone changed (the
// image gains a suffix). It returns their paths.
func rolloutConfigs(t *testing.T) (old, next string) {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "webapp"), 0o755))
	for _, name := range []string{"deployment.yaml.tmpl", "service.yaml.tmpl", "status.yaml.tmpl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "webapp", name))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "webapp", name), data, 0o644))
		if name == "deployment.yaml.tmpl" {
			changed := strings.Replace(string(data), "image: {{ .Spec.image }}", `image: "{{ .Spec.image }}-next"`, 1)
			if changed == string(data) {
				t.Fatal("the Deployment template has no image line to change")
			}
			must(t, os.WriteFile(filepath.Join(dir, "webapp", "deployment-next.yaml.tmpl"), []byte(changed), 0o644))
		}
	}
	config := func(name, deployment string) string {
		path := filepath.Join(dir, name)
		must(t, os.WriteFile(path, []byte(`resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [webapp/`+deployment+`, webapp/service.yaml.tmpl]
    statusTemplate: webapp/status.yaml.tmpl
    rollout: {maxInFlight: 1, maxFailed: 1}
`), 0o644))
		return path
	}
	return config("old.yaml", "deployment.yaml.tmpl"), config("next.yaml", "deployment-next.yaml.tmpl")
}

// TestRolloutWritesOnlyTheChildrenItChanges: three WebApps whose every
// child carries the template revision annotation (covered by its applied
// hash) and whose status names no revision, as a stencil that stamps every
// child leaves them. The controller writes nothing for them, neither child
// nor status. A change to the Deployment template then moves one resource
// at a time (maxInFlight 1) with exactly its Deployment apply and one
// status patch naming the new revision: its Service, whose render did not
// change, is not written. After a restart mid-rollout, the state is read
// back from the moved resource's status.
func TestRolloutWritesOnlyTheChildrenItChanges(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	old, next := rolloutConfigs(t)
	spec := map[string]any{"image": "nginx:1.27", "replicas": int64(1), "port": int64(80)}
	legacy := func(name string) (*unstructured.Unstructured, []*unstructured.Unstructured) {
		parent := webapp(name, spec)
		children := renderedLive(t, old, parent, true)
		for _, ch := range children {
			if _, ok := ch.GetAnnotations()[contract.AnnotationTemplateRevision]; !ok {
				t.Fatalf("%s/%s: the fixture's legacy child has no revision annotation", ch.GetKind(), ch.GetName())
			}
		}
		st := status.Desired(parent, status.Outcome{Live: children, Extra: map[string]any{"image": spec["image"]}})
		parent = parent.DeepCopy()
		parent.Object["status"] = st
		return parent, children
	}
	var parents []*unstructured.Unstructured
	var children []*unstructured.Unstructured
	for _, name := range []string{"a", "b", "c"} {
		p, ch := legacy(name)
		parents, children = append(parents, p), append(children, ch...)
	}

	// The upgrade: same templates, new controller.
	f := newFixture(t)
	f.config = old
	f.cache = append(append(f.cache, parents...), children...)
	f.newReconciler(ctx)
	for _, name := range []string{"a", "b", "c"} {
		if got := f.syncActions(ctx, name); len(got) != 0 {
			t.Errorf("upgrade: %s was written although nothing changed: %v", name, got)
		}
	}

	// The Deployment template changes.
	f = newFixture(t)
	f.config = next
	f.cache = append(append(f.cache, parents...), children...)
	f.newReconciler(ctx)
	got := f.syncActions(ctx, "a")
	want := []string{"patch deployments a (apply)", "patch webapps/status a"}
	if !slices.Equal(got, want) {
		t.Fatalf("a moved with %v; want %v (its Service's render did not change)", got, want)
	}
	for _, a := range f.client.Actions() {
		if p, ok := a.(core.PatchAction); ok && a.GetResource().Resource == "deployments" &&
			strings.Contains(string(p.GetPatch()), contract.AnnotationTemplateRevision) {
			t.Errorf("the Deployment written on the new revision still carries %s: %s", contract.AnnotationTemplateRevision, p.GetPatch())
		}
		if p, ok := a.(core.PatchAction); ok && a.GetSubresource() == "status" &&
			!strings.Contains(string(p.GetPatch()), `"templateRevision"`) {
			t.Errorf("a's status patch does not name the revision: %s", p.GetPatch())
		}
	}
	for _, name := range []string{"b", "c"} {
		if got := f.syncActions(ctx, name); len(got) != 0 {
			t.Fatalf("%s was written while a rolls (maxInFlight 1): %v", name, got)
		}
	}

	// A restart: a is on the new revision (its status says so) with its new
	// Deployment Ready and its old Service, still annotated.
	f = newFixture(t)
	f.config = next
	f.cache = append(f.cache, onRevision(t, next, parents[0]), parents[1], parents[2])
	for _, ch := range renderedWith(t, next, parents[0]) {
		if ch.GetKind() == "Deployment" {
			f.cache = append(f.cache, ch)
		}
	}
	for _, ch := range children {
		if ch.GetName() != "a" || ch.GetKind() == "Service" {
			f.cache = append(f.cache, ch)
		}
	}
	f.newReconciler(ctx)
	if got := f.syncActions(ctx, "a"); len(got) != 0 {
		t.Errorf("a, moved and Ready, was written again after the restart: %v", got)
	}
	if got, want := f.syncActions(ctx, "b"), []string{"patch deployments b (apply)", "patch webapps/status b"}; !slices.Equal(got, want) {
		t.Errorf("b moved with %v; want %v", got, want)
	}
	if got := f.syncActions(ctx, "c"); len(got) != 0 {
		t.Errorf("c was written while b rolls: %v", got)
	}
}

// TestPrunesRevision: the revision goes on each child only where the
// status schema would drop it.
func TestPrunesRevision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema map[string]any
		want   bool
	}{
		{"preserves unknown fields", map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}, false},
		{"declares it", map[string]any{"type": "object", "properties": map[string]any{
			"phase": map[string]any{"type": "string"}, "templateRevision": map[string]any{"type": "string"}}}, false},
		{"declares only phase", map[string]any{"type": "object", "properties": map[string]any{"phase": map[string]any{"type": "string"}}}, true},
	} {
		if got := prunesRevision(tc.schema); got != tc.want {
			t.Errorf("%s: prunesRevision = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	must(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

// countingWriter records every outcome a sync reports.
type countingWriter struct {
	Writer
	outcomes *[]Outcome
}

// Synced implements Writer.
func (w countingWriter) Synced(o Outcome) { *w.outcomes = append(*w.outcomes, o) }

// TestOneOutcomePerSync: each sync reports exactly one outcome, for a
// resource the rollout admits, one it holds, and one it holds in a plan
// (PlanHeld: rendered all the same, the one outcome carrying both why it
// is held and what it rendered). A held plan reported twice before.
func TestOneOutcomePerSync(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	spec := map[string]any{"image": "nginx:1.27", "replicas": int64(1), "port": int64(80)}
	f := newFixture(t)
	f.config = "testdata/stencil-rollout.yaml"
	for _, name := range []string{"a", "b", "c"} {
		p, ch := converged(t, webapp(name, spec))
		f.cache = append(f.cache, p)
		f.cache = append(f.cache, ch...)
	}
	f.newReconciler(ctx)
	var got []Outcome
	f.c.writer = countingWriter{Writer: f.c.writer, outcomes: &got}
	for _, c := range []struct {
		name     string
		planHeld bool
		held     bool
	}{{"a", false, false}, {"b", false, true}, {"c", true, true}} {
		got = nil
		f.c.opts.PlanHeld = c.planHeld
		f.syncActions(ctx, c.name)
		if len(got) != 1 {
			t.Fatalf("%s: %d outcomes reported, want 1: %+v", c.name, len(got), got)
		}
		if (got[0].Held != "") != c.held {
			t.Errorf("%s: held %q, want held %v", c.name, got[0].Held, c.held)
		}
		if rendered := got[0].Render != nil; rendered != (!c.held || c.planHeld) {
			t.Errorf("%s: rendered %v (held %v, plan %v)", c.name, rendered, c.held, c.planHeld)
		}
	}
}
