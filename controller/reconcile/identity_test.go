package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/controller/reconcile/memory"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/requeue"
)

const builderUser = "system:serviceaccount:ns:builder"

// builderAccount is the ServiceAccount testdata/stencil-identity.yaml's
// identity names, in the WebApps' namespace.
func builderAccount() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "builder", "namespace": "ns", "uid": "uid-sa"},
	}}
}

// asActions are the writes made as the identity, without list and watch.
func (f *fixture) asActions() []core.Action {
	var out []core.Action
	for _, a := range f.as.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

// TestIdentityWritesEveryChildAsTheTenant: with identity {tenant: builder},
// the account is read with stencil's own client, every child write goes
// through the client that impersonates builder in the resource's
// namespace, and reads stay stencil's.
func TestIdentityWritesEveryChildAsTheTenant(t *testing.T) {
	f := newFixture(t)
	f.config = "testdata/stencil-identity.yaml"
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)})
	f.cache = append(f.cache, p)
	f.api = append(f.api, p, builderAccount())
	own, err := f.run("demo")
	if err != nil {
		t.Fatal(err)
	}
	expectActions(t, own, "get serviceaccounts builder", "get deployments demo", "get services demo")
	expectActions(t, f.asActions(), "patch deployments demo (apply)", "patch services demo (apply)")
	if users := slices.Compact(f.users); len(users) != 1 || users[0] != builderUser {
		t.Errorf("impersonated %v, want only %s", f.users, builderUser)
	}
	expectEvent(t, f.recorder, "Normal Created Created Deployment/demo, Service/demo")
}

// TestIdentityForbiddenFailsTheResourceAndPrunesNothing: the identity may
// not apply the Deployment. The resource says Forbidden, naming the
// identity, verb, kind and namespace, with one Warning event; the Service
// no longer rendered is not pruned in that pass; the sync is retried, not
// held as terminal.
func TestIdentityForbiddenFailsTheResourceAndPrunesNothing(t *testing.T) {
	f := newFixture(t)
	f.config = "testdata/stencil-identity.yaml"
	p, children := converged(t, webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}))
	// A new image (the Deployment drifts from the render) and no port (the
	// Service is no longer rendered).
	spec := p.Object["spec"].(map[string]any)
	spec["image"] = "nginx:1.28"
	delete(spec, "port")
	p.SetGeneration(2)
	f.cache = append(f.cache, p)
	f.cache = append(f.cache, children...)
	f.api = append(f.api, p, builderAccount(), children[1])
	_, ctx := ktesting.NewTestContext(t)
	f.newReconciler(ctx)
	f.as.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "demo",
			errors.New(`User "system:serviceaccount:ns:builder" cannot patch resource "deployments"`))
	})
	err := f.c.Sync(ctx, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}})
	after, cause := requeue.Split(err)
	if cause == nil || requeue.IsTerminal(cause) || after <= 0 {
		t.Errorf("Sync = %v (look again after %v); want a transient error looked at again", err, after)
	}
	expectActions(t, f.asActions(), "patch deployments demo (apply)")
	var statusPatch core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("pruned in a pass the identity was refused in: %s", describe([]core.Action{a}))
		}
		if a.GetSubresource() == "status" {
			statusPatch = a
		}
	}
	if statusPatch == nil {
		t.Fatal("no status patch")
	}
	c := conditionOf(t, statusPatch)
	msg := fmt.Sprint(c["message"])
	if c["reason"] != status.ReasonForbidden || !strings.Contains(msg, builderUser+" may not patch Deployment in namespace ns") {
		t.Errorf("Ready condition = %v, want Forbidden naming %s, patch, Deployment and ns", c, builderUser)
	}
	expectEvent(t, f.recorder, "Warning Forbidden "+builderUser)
	expectNoEvent(t, f.recorder)
}

// TestIdentityNotFoundWritesNothing: the tenant's account does not exist
// in the resource's namespace. Nothing is written, as the tenant or as
// stencil; the resource says IdentityNotFound and is looked at again.
func TestIdentityNotFoundWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.config = "testdata/stencil-identity.yaml"
	p := webapp("demo", map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)})
	f.cache = append(f.cache, p)
	f.api = append(f.api, p)
	own, err := f.run("demo")
	if err == nil || requeue.IsTerminal(err) {
		t.Errorf("Sync = %v; want a transient error, retried", err)
	}
	expectActions(t, own, "get serviceaccounts builder", "patch webapps/status demo")
	expectActions(t, f.asActions())
	c := conditionOf(t, own[1])
	if c["reason"] != status.ReasonIdentityNotFound || !strings.Contains(fmt.Sprint(c["message"]), "ServiceAccount ns/builder does not exist") {
		t.Errorf("Ready condition = %v, want IdentityNotFound naming ns/builder", c)
	}
	expectEvent(t, f.recorder, "Warning IdentityNotFound")
}

// TestIdentityRefusalIsRemembered: a second resource of the tenant whose
// write was just refused fails from memory, with the same message but its
// own child's name, and sends nothing; the recheck sends it again.
func TestIdentityRefusalIsRemembered(t *testing.T) {
	f := newFixture(t)
	f.config = "testdata/stencil-identity.yaml"
	a := webapp("a", map[string]any{"image": "nginx:1.27", "replicas": int64(1)})
	b := webapp("b", map[string]any{"image": "nginx:1.27", "replicas": int64(1)})
	f.cache = append(f.cache, a, b)
	f.api = append(f.api, a, b, builderAccount())
	_, ctx := ktesting.NewTestContext(t)
	f.newReconciler(ctx)
	sent := 0
	f.as.PrependReactor("patch", "deployments", func(core.Action) (bool, runtime.Object, error) {
		sent++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "a",
			errors.New(`User "system:serviceaccount:ns:builder" cannot patch resource "deployments"`))
	})
	key := func(name string) Key {
		return Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	messages := map[string]string{}
	for _, name := range []string{"a", "b"} {
		err := f.c.Sync(ctx, key(name))
		var fe *forbiddenError
		if !errors.As(err, &fe) || fe.name != name {
			t.Fatalf("Sync(%s) = %v, want Forbidden for Deployment/%s", name, err, name)
		}
		messages[name] = strings.ReplaceAll(fe.Error(), "Deployment/"+name, "Deployment/X")
	}
	if sent != 1 {
		t.Errorf("%d applies sent as builder, want 1 (the second refused from memory)", sent)
	}
	if messages["a"] != messages["b"] {
		t.Errorf("the two refusals differ beyond the child's name:\n%s\n%s", messages["a"], messages["b"])
	}
	// The recheck is due: the refusal is taken to have expired.
	f.c.memory.IdentityRefusals.Set(memory.WriteKey{User: builderUser, Verb: "create", Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Namespace: "ns"},
		memory.Refused{Err: errors.New("x"), Until: time.Now()})
	if err := f.c.Sync(ctx, key("b")); !isForbidden(err) || sent != 2 {
		t.Errorf("after the recheck: Sync = %v with %d applies sent, want Forbidden again with 2", err, sent)
	}
}
