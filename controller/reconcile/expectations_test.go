package reconcile

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/reconcile/transform"
)

// lateWatch is a fake API server for one Deployment whose watch delivers
// events only when the test says so: applies are answered the way the API
// server answers them (field ownership, defaults, a new integer
// resourceVersion) and the informer cache keeps the old object until
// deliver: the watch of a slow, loaded API server, on demand.
type lateWatch struct {
	t   *testing.T
	f   *fixture
	ctx context.Context
	// server is the Deployment as the API server stores it now.
	server *unstructured.Unstructured
	rv     int
}

func newLateWatch(ctx context.Context, t *testing.T, f *fixture, dep *unstructured.Unstructured) *lateWatch {
	w := &lateWatch{t: t, f: f, ctx: ctx, server: dep.DeepCopy(), rv: 100}
	w.server.SetResourceVersion(strconv.Itoa(w.rv))
	must(t, w.indexer().Update(w.cached(w.server)))
	f.client.PrependReactor("patch", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		want := &unstructured.Unstructured{}
		if err := want.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		out := serverApply(t, w.server, want)
		w.store(out)
		return true, out.DeepCopy(), nil
	})
	return w
}

func (w *lateWatch) indexer() interface {
	Update(any) error
	GetByKey(string) (any, bool, error)
} {
	return w.f.c.reg.Child(w.server.GroupVersionKind()).Informers[""].GetIndexer()
}

// cached is obj as the informer's transform stores it.
func (w *lateWatch) cached(obj *unstructured.Unstructured) *unstructured.Unstructured {
	u, _ := transform.Lean(obj.DeepCopy())
	return u.(*unstructured.Unstructured)
}

// store makes obj the server's object, under a new resourceVersion.
func (w *lateWatch) store(obj *unstructured.Unstructured) {
	w.rv++
	obj.SetResourceVersion(strconv.Itoa(w.rv))
	obj.SetUID(w.server.GetUID())
	w.server = obj
}

// deliver brings the watch event of the server's current object to the
// cache and to the reconciler, as the controller's informer handler does.
func (w *lateWatch) deliver() {
	cur := w.cached(w.server)
	must(w.t, w.indexer().Update(cur))
	w.f.c.Observe(cur)
}

// revert is another writer (manager) setting the image back to image.
func (w *lateWatch) revert(manager, image string) {
	w.store(serverUpdate(w.t, w.server, manager, func(u *unstructured.Unstructured) {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["image"] = image
		must(w.t, unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"))
	}))
}

// lateWatchFixture is a converged WebApp whose Deployment is served by a
// lateWatch.
func lateWatchFixture(t *testing.T) (context.Context, *fixture, *lateWatch, Key) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.newReconciler(ctx)
	w := newLateWatch(ctx, t, f, children[0])
	return ctx, f, w, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
}

// events drains the fake recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func throttledIn(f *fixture) bool {
	for _, a := range f.client.Actions() {
		if p, ok := a.(core.PatchAction); ok && p.GetSubresource() == "status" &&
			strings.Contains(string(p.GetPatch()), `"type":"`+contract.ConditionThrottled+`"`) && strings.Contains(string(p.GetPatch()), `"True"`) {
			return true
		}
	}
	return false
}

// One hand edit, then three syncs (a sibling's status, the parent's status
// patch, a resync) before the watch event of stencil's correction arrives:
// the correction is sent once, and nothing calls it a fight.
func TestHandEditCostsOneWriteWhileTheWatchLags(t *testing.T) {
	ctx, f, w, key := lateWatchFixture(t)
	w.revert("kubectl-edit", "evil:latest")
	w.deliver()

	must(t, f.sync(ctx, key))
	if got := f.patches("deployments"); got != 1 {
		t.Fatalf("the hand edit was corrected with %d applies, want 1", got)
	}
	for i := range 3 {
		must(t, f.sync(ctx, key))
		if got := f.patches("deployments"); got != 1 {
			t.Fatalf("sync %d before the watch event: %d applies in all, want 1", i+1, got)
		}
	}
	w.deliver()
	must(t, f.sync(ctx, key))
	if got := f.patches("deployments"); got != 1 {
		t.Errorf("after the watch event: %d applies in all, want 1", got)
	}
	for _, e := range f.events() {
		if strings.Contains(e, status.ReasonFieldFight) {
			t.Errorf("one hand edit recorded %q", e)
		}
	}
	if throttledIn(f) {
		t.Error("one hand edit made the resource Throttled")
	}
	if n := f.c.expect.Len(); n != 0 {
		t.Errorf("%d writes still expected once the cache showed them, want 0", n)
	}
}

// A real fight: another writer sets the field back each time after it has
// seen stencil's correction. The corrections are limited to the burst, one
// FieldFight event is recorded and the resource says Throttled, naming the
// other writer.
func TestFightingWriterIsRateLimited(t *testing.T) {
	ctx, f, w, key := lateWatchFixture(t)
	for range 20 {
		w.revert("kubectl-set", "reverted")
		w.deliver()
		must(t, f.sync(ctx, key))
		// stencil's correction, if any, reaches the cache before the next
		// revert: this writer reverts what it sees.
		w.deliver()
	}
	if got := f.patches("deployments"); got != f.c.opts.FightBurst {
		t.Errorf("20 reverts made %d applies, want the burst of %d", got, f.c.opts.FightBurst)
	}
	fights := 0
	for _, e := range f.events() {
		if strings.Contains(e, status.ReasonFieldFight) {
			fights++
			if !strings.Contains(e, "kubectl-set") {
				t.Errorf("the FieldFight event does not name kubectl-set: %q", e)
			}
		}
	}
	if fights != 1 {
		t.Errorf("%d FieldFight events, want 1 per episode", fights)
	}
	if !throttledIn(f) {
		t.Error("status does not report the throttling")
	}
}

// A child stencil pruned stays in the cache until the delete's event: a
// sync in between does not delete it again.
func TestPruneIsSentOnceWhileTheWatchLags(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	extra := children[1].DeepCopy()
	extra.SetName("old")
	extra.SetUID("uid-service-old")
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.cache = append(f.cache, extra)
	f.newReconciler(ctx)
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	deletes := func() int {
		n := 0
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "delete" {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		must(t, f.sync(ctx, key))
		if got := deletes(); got != 1 {
			t.Fatalf("sync %d: %d deletes in all, want 1", i+1, got)
		}
	}
	inf := f.c.reg.Child(extra.GroupVersionKind()).Informers[""].GetIndexer()
	must(t, inf.Delete(extra))
	f.c.Gone(extra)
	if n := f.c.expect.Len(); n != 0 {
		t.Errorf("%d writes still expected after the delete event, want 0", n)
	}
}
