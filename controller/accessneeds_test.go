package controller

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedauthenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	authorizationfake "k8s.io/client-go/kubernetes/typed/authorization/v1/fake"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	core "k8s.io/client-go/testing"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/install"
)

// reviewer is a Kube that answers access reviews only: it refuses the
// verbs in denied (by "verb resource"), allows the rest, and records what
// it was asked. Events go to the plane's FakeRecorder, so the other
// groups are never used.
type reviewer struct {
	fake core.Fake

	mu     sync.Mutex
	denied map[string]bool
	asked  []authorizationv1.ResourceAttributes
}

func newReviewer(denied ...string) *reviewer {
	r := &reviewer{denied: map[string]bool{}}
	for _, d := range denied {
		r.denied[d] = true
	}
	r.fake.AddReactor("create", "selfsubjectaccessreviews", func(action core.Action) (bool, runtime.Object, error) {
		review := action.(core.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		a := review.Spec.ResourceAttributes
		r.mu.Lock()
		defer r.mu.Unlock()
		r.asked = append(r.asked, *a)
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		review.Status.Allowed = !r.denied[a.Verb+" "+resource]
		if !review.Status.Allowed {
			review.Status.Reason = "no RBAC policy matched"
		}
		return true, review, nil
	})
	return r
}

// allow grants every verb from now on.
func (r *reviewer) allow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.denied)
}

// askedFor returns the verbs asked of resource in namespace, in order.
func (r *reviewer) askedFor(resource, namespace string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var verbs []string
	for _, a := range r.asked {
		if a.Resource == resource && a.Subresource == "" && a.Namespace == namespace {
			verbs = append(verbs, a.Verb)
		}
	}
	return verbs
}

func (r *reviewer) CoreV1() typedcorev1.CoreV1Interface                               { return nil }
func (r *reviewer) CoordinationV1() coordinationv1.CoordinationV1Interface            { return nil }
func (r *reviewer) AuthenticationV1() typedauthenticationv1.AuthenticationV1Interface { return nil }
func (r *reviewer) AuthorizationV1() typedauthorizationv1.AuthorizationV1Interface {
	return &authorizationfake.FakeAuthorizationV1{Fake: &r.fake}
}

func TestReloadAddingAChildKindWithoutRBACIsRefusedNamingTheVerbs(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, registryConfig(t, false, false))
	kube := newReviewer("create configmaps", "patch configmaps", "delete configmaps")
	p := startPlaneKube(t, path, kube, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"),
		webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("webapps is served and reconciled", func() bool { return p.served(webappGVR) && p.applied(deploymentGVR, "a") })
	before, kinds := p.c.reg.Parent(webappGVR), p.c.reg.ChildKinds()

	// The config gains a ConfigMap child that stencil may read but not write.
	writeConfig(t, dir, registryConfig(t, true, false))
	cfg, sets := loadConfig(t, path)
	err := p.c.Reconfigure(p.ctx, cfg, sets)
	want := "reload refused: stencil may not create, patch, delete configmaps in all namespaces (RBAC)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Reconfigure = %v, want an error saying %q", err, want)
	}
	var denied *registry.AccessDeniedError
	if !errors.As(err, &denied) || denied.Resource != "configmaps" || strings.Join(denied.Verbs, ",") != "create,patch,delete" {
		t.Errorf("Reconfigure error = %#v, want a *registry.AccessDeniedError for configmaps create, patch, delete", denied)
	}
	// Every verb "stencil rbac" grants a child kind was asked, cluster-wide.
	if got := kube.askedFor("configmaps", ""); strings.Join(got, ",") != strings.Join(install.ChildVerbs, ",") {
		t.Errorf("verbs reviewed for configmaps = %v, want %v", got, install.ChildVerbs)
	}

	// Through the reload loop as run wires it: the metric says 0.
	p.metrics.ConfigLoaded(true, time.Now())
	w := reload.New(reload.Source{Path: path}, 10*time.Millisecond, p.c.Reconfigure, p.metrics.ConfigLoaded)
	go w.Run(p.ctx)
	writeConfig(t, dir, registryConfig(t, true, false)+"# again\n")
	p.eventually("the reload is refused", func() bool { return gaugeValue(p.t, p.metrics.reloadOK) == 0 })

	// Nothing of the new config was started or written.
	if p.watching(configMapGVR) || p.touched(configMapGVR) {
		t.Error("a refused reload listed, watched or wrote ConfigMaps")
	}
	if got := p.c.reg.Parent(webappGVR); got.Set != before.Set || got.Informers[""] != before.Informers[""] {
		t.Errorf("webapps entry = %+v, want the running one %+v", got, before)
	}
	if childKind := p.c.reg.Child(configMapGVK); childKind != nil || !sameChildKinds(p.c.reg.ChildKinds(), kinds) {
		t.Errorf("a refused reload changed the child kinds: ConfigMap %+v", childKind)
	}
	p.create(webappGVR, webapp("b", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("the new WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "b") })

	// Granted, the next reload commits and the ConfigMaps are applied.
	kube.allow()
	writeConfig(t, dir, registryConfig(t, true, false)+"# RBAC granted\n")
	p.eventually("the reload is applied", func() bool { return gaugeValue(p.t, p.metrics.reloadOK) == 1 })
	p.eventually("the ConfigMaps are applied", func() bool { return p.applied(configMapGVR, "a-config") && p.applied(configMapGVR, "b-config") })
}

func TestReloadAddingAResourceStencilMayNotWatchIsRefused(t *testing.T) {
	path := writeConfig(t, t.TempDir(), registryConfig(t, false, false))
	kube := newReviewer("watch gizmos", "patch gizmos/status")
	p := startPlaneKube(t, path, kube, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"),
		crdObject("gizmos", "toys.example.com", "Gizmo", "v1"))
	p.eventually("webapps is served", func() bool { return p.served(webappGVR) })

	cfg, sets := loadConfig(t, writeConfig(t, t.TempDir(), registryConfig(t, false, true)))
	err := p.c.Reconfigure(p.ctx, cfg, sets)
	for _, want := range []string{
		"stencil may not watch gizmos.toys.example.com in all namespaces (RBAC)",
		"stencil may not patch gizmos.toys.example.com/status in all namespaces (RBAC)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Reconfigure = %v, want an error saying %q", err, want)
		}
	}
	if p.c.reg.Parent(gizmoGVR) != nil || p.watching(gizmoGVR) {
		t.Error("a refused reload published or started the gizmos entry")
	}
	// Kept entries are not reviewed again.
	if got := kube.askedFor("webapps", ""); len(got) != 0 {
		t.Errorf("the running webapps entry was reviewed again: %v", got)
	}
}
