package reconcile

import (
	"context"
	"fmt"
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

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/gvr"
	"stencil.dev/stencil/templates"
)

var webapps = schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}

func rolloutKey(i int) Key {
	return Key{GVR: webapps, NamespacedName: types.NamespacedName{Namespace: "team", Name: fmt.Sprintf("wa-%02d", i)}}
}

func rolloutLimits(inFlight, failed intstr.IntOrString) *gvr.Rollout {
	return &gvr.Rollout{MaxInFlight: &inFlight, MaxFailed: &failed}
}

// admitted lists, in key order, the keys of n that admit lets through.
func admitted(r *rollout, n int) []int {
	var out []int
	for i := range n {
		if r.admit(rolloutKey(i)) {
			out = append(out, i)
		}
	}
	return out
}

func keyIndexes(keys []Key) []int {
	var out []int
	for _, k := range keys {
		var i int
		fmt.Sscanf(k.Name, "wa-%02d", &i)
		out = append(out, i)
	}
	return out
}

// TestRolloutStateMachine walks one entry of 20 resources through a bad
// change (maxInFlight 3, maxFailed 1), a restart while halted, a revert,
// a resource deleted mid-rollout and a good change.
func TestRolloutStateMachine(t *testing.T) {
	limits := rolloutLimits(intstr.FromInt32(3), intstr.FromInt32(1))
	all := func(st rolloutState) map[Key]rolloutState {
		m := map[Key]rolloutState{}
		for i := range 20 {
			m[rolloutKey(i)] = st
		}
		return m
	}

	// A bad change: every resource is on the old revision.
	r := newRollout("bad", limits, all(rolloutPending), nil)
	if got := admitted(r, 20); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("first pass admitted %v, want [0 1 2]", got)
	}
	if got := r.next(); len(got) != 0 {
		t.Fatalf("next with no free slot = %v, want none", keyIndexes(got))
	}
	// The caches lag behind the move: a moved resource still shows its
	// old children and must not count as pending again.
	if st := r.observe(rolloutKey(0), rolloutPending); st != rolloutRolling {
		t.Fatalf("a moved resource seen with old children is %s, want rolling", st)
	}
	// Resource 0 gets Ready: its slot goes to the first pending one.
	r.observe(rolloutKey(0), rolloutDone)
	if got := keyIndexes(r.next()); !slices.Equal(got, []int{3}) {
		t.Fatalf("next after one done = %v, want [3]", got)
	}
	if !r.admit(rolloutKey(3)) || r.admit(rolloutKey(4)) {
		t.Fatal("want 3 admitted into the free slot and 4 refused")
	}
	// Resource 1 fails: the rollout halts, nothing else moves.
	r.observe(rolloutKey(1), rolloutFailed)
	if !r.halted() {
		t.Fatal("one failure with maxFailed 1 did not halt the rollout")
	}
	r.observe(rolloutKey(2), rolloutDone)
	if got := admitted(r, 20); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("while halted admitted %v, want only the moved ones [0 1 2 3]", got)
	}
	if got := r.next(); len(got) != 0 {
		t.Fatalf("next while halted = %v, want none", keyIndexes(got))
	}
	if n := r.counts[rolloutPending]; n != 16 {
		t.Fatalf("pending = %d, want 16", n)
	}

	// A restart reads the same state back from the caches: still halted.
	restart := all(rolloutPending)
	restart[rolloutKey(0)], restart[rolloutKey(1)], restart[rolloutKey(2)], restart[rolloutKey(3)] =
		rolloutDone, rolloutFailed, rolloutDone, rolloutRolling
	r = newRollout("bad", limits, restart, nil)
	if !r.halted() || len(admitted(r, 20)) != 4 || len(r.next()) != 0 {
		t.Fatalf("after a restart: halted %v, admitted %v, next %v; want halted, only the 4 moved, none woken",
			r.halted(), admitted(r, 20), keyIndexes(r.next()))
	}

	// A revert: the 16 that never moved are on the reverted revision
	// already; the 4 that moved are pending, and the failed one goes first.
	revert := all(rolloutDone)
	for i := range 4 {
		revert[rolloutKey(i)] = rolloutPending
	}
	r = newRollout("good", limits, revert, map[Key]bool{rolloutKey(1): true})
	if r.halted() {
		t.Fatal("a new rollout starts halted")
	}
	if got := keyIndexes(r.next()); !slices.Equal(got, []int{1, 0, 2}) {
		t.Fatalf("woken first = %v, want the failed one first: [1 0 2]", got)
	}
	if r.admit(rolloutKey(0)) {
		t.Fatal("0 moved before 1, which failed on the old revision")
	}
	if !r.admit(rolloutKey(1)) || !r.admit(rolloutKey(0)) || !r.admit(rolloutKey(2)) || r.admit(rolloutKey(3)) {
		t.Fatal("want 1, then 0 and 2 admitted, and 3 refused (3 in flight)")
	}
	// Resource 0 is deleted mid-rollout: its slot frees.
	r.forget(rolloutKey(0))
	if got := keyIndexes(r.next()); !slices.Equal(got, []int{3}) {
		t.Fatalf("next after a delete = %v, want [3]", got)
	}
	// A resource created meanwhile has no children: not pending, it renders at once.
	r.observe(rolloutKey(30), rolloutNew)
	if !r.admit(rolloutKey(30)) {
		t.Fatal("a new resource waited for a slot")
	}
	for _, i := range []int{1, 2} {
		r.observe(rolloutKey(i), rolloutDone)
	}
	if !r.admit(rolloutKey(3)) {
		t.Fatal("3 refused with 2 slots free")
	}
	r.observe(rolloutKey(3), rolloutDone)
	if r.counts[rolloutPending] != 0 || r.inFlight() != 0 || r.counts[rolloutDone] != 19 {
		t.Fatalf("at the end: %v (new, pending, rolling, done, failed), want 19 done", r.counts)
	}
}

// TestRolloutNeverMoreThanMaxInFlight admits and completes resources in
// random-looking orders and checks the bound after every step.
func TestRolloutNeverMoreThanMaxInFlight(t *testing.T) {
	for _, tt := range []struct {
		inFlight intstr.IntOrString
		n, want  int
	}{
		{intstr.FromInt32(3), 20, 3}, {intstr.FromString("25%"), 20, 5}, {intstr.FromString("1%"), 20, 1},
	} {
		states := map[Key]rolloutState{}
		for i := range tt.n {
			states[rolloutKey(i)] = rolloutPending
		}
		r := newRollout("rev", rolloutLimits(tt.inFlight, intstr.FromInt32(1)), states, nil)
		peak, steps := 0, 0
		for r.counts[rolloutDone] < tt.n && steps < 10*tt.n {
			steps++
			for i := tt.n - 1; i >= 0; i-- {
				r.admit(rolloutKey((i * 7) % tt.n))
				peak = max(peak, r.inFlight())
			}
			// Complete the moved ones with an odd index first.
			for i := range tt.n {
				if k := rolloutKey(i); r.states[k] == rolloutRolling && (i%2 == 1 || steps%2 == 0) {
					r.observe(k, rolloutDone)
				}
			}
		}
		if r.counts[rolloutDone] != tt.n || peak != tt.want {
			t.Errorf("maxInFlight %s of %d: %d done, peak %d in flight; want all done, peak %d", tt.inFlight.String(), tt.n, r.counts[rolloutDone], peak, tt.want)
		}
	}
}

// onRevision returns parent as the controller leaves it once moved to the
// templates of the config at path: its status names their revision.
func onRevision(t *testing.T, path string, parent *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cfg, err := gvr.Load(path)
	must(t, err)
	sets, err := templates.LoadAll(cfg, templates.Options{})
	must(t, err)
	parent = parent.DeepCopy()
	must(t, unstructured.SetNestedField(parent.Object, sets[0].Revision(), "status", templates.StatusTemplateRevision))
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

// TestRolloutConfigChangeMidRollout: a second change while the first is
// still moving (5 done, 3 rolling, 12 not moved) starts a new rollout in
// which all 20 are pending (none carries the new revision), bounded the
// same way, and nothing halts it that failed on neither revision.
func TestRolloutConfigChangeMidRollout(t *testing.T) {
	limits := rolloutLimits(intstr.FromInt32(3), intstr.FromInt32(1))
	states := map[Key]rolloutState{}
	for i := range 20 {
		states[rolloutKey(i)] = rolloutPending
	}
	first := newRollout("rev1", limits, states, nil)
	for i := range 8 {
		first.set(rolloutKey(i), rolloutRolling)
	}
	for i := range 5 {
		first.observe(rolloutKey(i), rolloutDone)
	}
	if first.inFlight() != 3 || first.counts[rolloutDone] != 5 {
		t.Fatalf("setup: %v", first.counts)
	}

	// What the caches say under rev2: every resource's children carry rev1
	// or the revision before it, so all 20 are pending.
	second := newRollout("rev2", limits, states, nil)
	if second.counts[rolloutPending] != 20 || second.halted() {
		t.Fatalf("rev2 starts with %v (new, pending, rolling, done, failed), halted %v; want 20 pending", second.counts, second.halted())
	}
	if got := admitted(second, 20); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("rev2 admitted %v, want [0 1 2]", got)
	}
	for i := range 3 {
		second.observe(rolloutKey(i), rolloutDone)
	}
	if got := keyIndexes(second.next()); !slices.Equal(got, []int{3, 4, 5}) {
		t.Fatalf("rev2 next = %v, want [3 4 5]", got)
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

// TestRolloutWritesOnlyTheChildrenItChanges: three WebApps as an earlier
// version of stencil left them, every child carrying the template
// revision annotation (covered by its applied hash) and no revision in
// status. The upgraded controller writes nothing for them, neither child
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
			if _, ok := ch.GetAnnotations()[templates.AnnotationTemplateRevision]; !ok {
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
			strings.Contains(string(p.GetPatch()), templates.AnnotationTemplateRevision) {
			t.Errorf("the Deployment written on the new revision still carries %s: %s", templates.AnnotationTemplateRevision, p.GetPatch())
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
