package reconcile

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"stencil.dev/stencil/controller/requeue"
)

// A child the API server refuses for its content is sent once per render:
// the syncs its siblings' events bring do not send it again, a new render
// does, and so does the periodic resync (a refusal can hinge on other
// objects, as a taken nodePort does).
func TestRefusedChildIsSentOncePerRender(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p := webapp("demo", demoSpec())
	f.cache = append(f.cache, p)
	f.api = append(f.api, p)
	f.newReconciler(ctx)
	f.client.PrependReactor("patch", "services", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "demo", field.ErrorList{
			field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), 30080, "provided port is already allocated")})
	})
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	sync := func(step string, want int) {
		t.Helper()
		err := f.sync(ctx, key)
		if !requeue.IsTerminal(err) {
			t.Fatalf("%s: err = %v, want the terminal refusal", step, err)
		}
		if got := f.patches("services"); got != want {
			t.Errorf("%s: the Service was sent %d times in all, want %d", step, got, want)
		}
	}

	sync("first sync", 1)
	sync("a sibling's event", 1)
	sync("another sibling's event", 1)

	changed := p.DeepCopy()
	changed.Object["spec"].(map[string]any)["port"] = int64(8080)
	changed.SetResourceVersion("2")
	must(t, f.c.reg.Parent(webappGVR).Informers[""].GetIndexer().Update(changed))
	sync("a new render", 2)
	sync("the new render again", 2)

	f.c.memory.Refusals.Reset()
	sync("after the periodic resync", 3)

	must(t, f.c.reg.Parent(webappGVR).Informers[""].GetIndexer().Delete(changed))
	if err := f.sync(ctx, key); err != nil {
		t.Fatalf("deleted resource: err = %v", err)
	}
	if n := f.c.memory.Resources.Len(); n != 0 {
		t.Errorf("after the resource was deleted, stencil remembers %d resources, want 0", n)
	}
}

// A refused update of a child that exists is sent again once the live child
// changes (edited or replaced by hand to clear what made the API server
// refuse it), not only when the render does.
func TestRefusedUpdateIsSentAgainWhenTheLiveChildChanges(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	p, children := converged(t, webapp("demo", demoSpec()))
	p = p.DeepCopy()
	p.Object["spec"].(map[string]any)["port"] = int64(8080)
	p.SetGeneration(2)
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.newReconciler(ctx)
	f.client.PrependReactor("patch", "services", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "demo", field.ErrorList{
			field.Invalid(field.NewPath("spec", "ports").Index(0).Child("name"), "http", "Duplicate value")})
	})
	key := Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	for i, want := range []int{1, 1} {
		if err := f.sync(ctx, key); !requeue.IsTerminal(err) {
			t.Fatalf("sync %d: err = %v, want the terminal refusal", i+1, err)
		}
		if got := f.patches("services"); got != want {
			t.Errorf("sync %d: the Service was sent %d times in all, want %d", i+1, got, want)
		}
	}
	var svc *unstructured.Unstructured
	for _, c := range children {
		if c.GetKind() == "Service" {
			svc = c.DeepCopy()
		}
	}
	svc.SetResourceVersion(svc.GetResourceVersion() + "9")
	must(t, f.c.reg.Child(svc.GroupVersionKind()).Informers[""].GetIndexer().Update(svc))
	if err := f.sync(ctx, key); !requeue.IsTerminal(err) {
		t.Fatalf("after the hand edit: err = %v, want the terminal refusal", err)
	}
	if got := f.patches("services"); got != 2 {
		t.Errorf("after the hand edit: the Service was sent %d times in all, want 2", got)
	}
}

// patches counts the patches (applies included) the fake client was sent for
// resource.
func (f *fixture) patches(resource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}
