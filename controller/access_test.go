package controller

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedauthenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	authorizationfake "k8s.io/client-go/kubernetes/typed/authorization/v1/fake"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	core "k8s.io/client-go/testing"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/access"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/install"
	"stencil.dev/stencil/templates"
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
	var denied *access.DeniedError
	if !errors.As(err, &denied) || denied.Resource != "configmaps" || strings.Join(denied.Verbs, ",") != "create,patch,delete" {
		t.Errorf("Reconfigure error = %#v, want a *access.DeniedError for configmaps create, patch, delete", denied)
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

// entriesOf compiles a config text whose entries render tmpl.yaml, a
// template it writes next to it.
func entriesOf(t *testing.T, text string) []*entry.Entry {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "tmpl.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}\n"), 0o600))
	path := filepath.Join(dir, "stencil.yaml")
	must(t, os.WriteFile(path, []byte(text), 0o600))
	cfg, err := config.Load(path)
	must(t, err)
	entries, err := entry.Compile(cfg)
	must(t, err)
	return entries
}

// needsText prints needs one a line: "verbs resource[ named name] in namespace".
func needsText(needs []access.Need) string {
	var b strings.Builder
	for _, n := range needs {
		b.WriteString(strings.Join(n.Verbs, ","))
		b.WriteString(" " + n.ResourceName())
		if n.Name != "" {
			b.WriteString(" named " + n.Name)
		}
		b.WriteString(" in " + cmp.Or(n.Namespace, "*") + "\n")
	}
	return b.String()
}

const sitesEntry = `resources:
  - group: sites.example.com
    version: v1
    resource: sites
    namespaces: [team-a, team-b]
    children: [{apiVersion: v1, kind: ConfigMap}]
    templates: [tmpl.yaml]
`

func TestAccessNeedsOfAReadOfSecrets(t *testing.T) {
	running := entriesOf(t, sitesEntry)
	next := entriesOf(t, sitesEntry+`    reads:
      - {name: password, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.passwordSecret }}"}
      - {name: defaults, apiVersion: v1, kind: ConfigMap, objectName: platform-defaults, namespace: stencil-system}
      - {name: ca, apiVersion: v1, kind: Secret, objectName: platform-ca, namespace: stencil-system}
`)
	for _, tt := range []struct {
		name      string
		namespace string // run --namespace
		want      string
	}{{
		// A computed read: the kind, where the sites live. A fixed one:
		// that object, in the namespace the platform fixed. The sites and
		// their ConfigMaps, which the running config has, are not asked.
		name: "every namespace the entry lists",
		want: "get,list,watch configmaps named platform-defaults in stencil-system\n" +
			"get,list,watch secrets named platform-ca in stencil-system\n" +
			"get,list,watch secrets in team-a\n" +
			"get,list,watch secrets in team-b\n",
	}, {
		name: "--namespace team-a", namespace: "team-a",
		want: "get,list,watch configmaps named platform-defaults in stencil-system\n" +
			"get,list,watch secrets named platform-ca in stencil-system\n" +
			"get,list,watch secrets in team-a\n",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{opts: Options{Namespace: tt.namespace}}
			needs, err := access.Needs(c.roleOptions(), running, next)
			must(t, err)
			if got := needsText(needs); got != tt.want {
				t.Errorf("needs:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}

	// All of it, as from no config at all: the whole role, in the sites'
	// namespaces; what is cluster-scoped, cluster-wide.
	grants, err := install.Grants(next, install.RoleOptions{})
	must(t, err)
	needs := access.Beyond(grants, nil)
	want := "get,list,watch configmaps named platform-defaults in stencil-system\n" +
		"get,list,watch,create,patch,delete configmaps in team-a\n" +
		"get,list,watch,create,patch,delete configmaps in team-b\n" +
		"list,watch customresourcedefinitions.apiextensions.k8s.io in *\n" +
		"create,patch events in team-a\n" +
		"create,patch events in team-b\n" +
		"list,watch namespaces in *\n" +
		"get,list,watch secrets named platform-ca in stencil-system\n" +
		"get,list,watch secrets in team-a\n" +
		"get,list,watch secrets in team-b\n" +
		"get,list,watch sites.sites.example.com in team-a\n" +
		"get,list,watch sites.sites.example.com in team-b\n" +
		"update sites.sites.example.com/finalizers in team-a\n" +
		"update sites.sites.example.com/finalizers in team-b\n" +
		"patch sites.sites.example.com/status in team-a\n" +
		"patch sites.sites.example.com/status in team-b\n"
	if got := needsText(needs); got != want {
		t.Errorf("needs from no config:\n%s\nwant:\n%s", got, want)
	}

	// What the running config has covers the same object by name, and
	// every namespace covers one.
	wide := entriesOf(t, strings.Replace(sitesEntry, "    namespaces: [team-a, team-b]\n", "", 1)+`    reads:
      - {name: any, apiVersion: v1, kind: Secret, selector: {matchLabels: {a: "{{ .Name }}"}}}
      - {name: cm, apiVersion: v1, kind: ConfigMap, objectName: "{{ .Name }}"}
`)
	needs, err = access.Needs(install.RoleOptions{}, wide, next)
	must(t, err)
	if len(needs) != 0 {
		t.Errorf("needs beyond a config reading Secrets and ConfigMaps everywhere:\n%s", needsText(needs))
	}
}

func TestAccessNeedsWithManageCRDs(t *testing.T) {
	running := entriesOf(t, sitesEntry)
	next := entriesOf(t, sitesEntry+`  - group: toys.example.com
    version: v1
    resource: gizmos
    kind: Gizmo
    schema:
      spec:
        size: integer
    children: [{apiVersion: v1, kind: ConfigMap}]
    templates: [tmpl.yaml]
`)
	gizmos := "get,list,watch gizmos.toys.example.com in *\n" +
		"update gizmos.toys.example.com/finalizers in *\n" +
		"patch gizmos.toys.example.com/status in *\n"
	for _, tt := range []struct {
		manage bool
		want   string
	}{
		// Without --manage-crds stencil only reads CRDs, as before.
		{false, "get,list,watch,create,patch,delete configmaps in *\ncreate,patch events in *\n" + gizmos},
		// With it, the CRD it writes, by name, as "stencil rbac --manage-crds" grants.
		{true, "get,list,watch,create,patch,delete configmaps in *\n" +
			"get,create,patch customresourcedefinitions.apiextensions.k8s.io named gizmos.toys.example.com in *\n" +
			"create,patch events in *\n" + gizmos},
	} {
		c := &Controller{opts: Options{ManageCRDs: tt.manage}}
		needs, err := access.Needs(c.roleOptions(), running, next)
		must(t, err)
		if got := needsText(needs); got != tt.want {
			t.Errorf("--manage-crds=%v: needs:\n%s\nwant:\n%s", tt.manage, got, tt.want)
		}
		// Kept, the CRD is not asked again.
		needs, err = access.Needs(c.roleOptions(), next, next)
		must(t, err)
		if len(needs) != 0 {
			t.Errorf("--manage-crds=%v: needs of an unchanged config:\n%s", tt.manage, needsText(needs))
		}
	}
}

// exampleConfigs are the configs of the repository that "stencil rbac"
// takes: the examples, the tests' and the benchmarks'.
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, pattern := range []string{
		"../crds/stencil.yaml", "../crds/*/stencil.yaml", "../test/*/stencil.yaml", "../test/*/testdata/*/stencil.yaml",
		"../renderworker/testdata/stencil.yaml", "../templates/testdata/*/stencil.yaml", "reconcile/testdata/stencil*.yaml",
	} {
		m, err := filepath.Glob(pattern)
		must(t, err)
		paths = append(paths, m...)
	}
	if len(paths) < 10 {
		t.Fatalf("found %d example configs: %v", len(paths), paths)
	}
	t.Logf("example configs: %v", paths)
	return paths
}

// TestAccessNeedsAreWhatStencilRBACPrints holds a reload's access check
// to the ClusterRole: for every example config, loaded as "stencil rbac"
// loads it, and each flag it takes, what a reload from no config asks is
// exactly what the role's rules grant, verb by verb.
func TestAccessNeedsAreWhatStencilRBACPrints(t *testing.T) {
	type grant struct{ verb, group, resource, name string }
	for _, path := range exampleConfigs(t) {
		cfg, sets := loadConfig(t, path)
		entries := templates.Entries(sets)
		namespaces := map[string]bool{"": true}
		for _, e := range cfg.Resources {
			for _, ns := range e.Namespaces {
				namespaces[ns] = true
			}
			for _, rd := range e.Reads {
				namespaces[rd.Namespace] = true
			}
		}
		for _, flags := range []Options{{}, {ManageCRDs: true}, {MetricsSecure: true}, {ManageCRDs: true, MetricsSecure: true}} {
			c := &Controller{opts: flags}
			what := fmt.Sprintf("%s (--manage-crds=%v, --metrics-secure=%v)", path, flags.ManageCRDs, flags.MetricsSecure)
			role, err := install.ClusterRole("stencil", entries, install.RoleOptions{ManageCRDs: flags.ManageCRDs, MetricsSecure: flags.MetricsSecure})
			must(t, err)
			printed := map[grant]bool{}
			for _, r := range role.Rules {
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, name := range names {
							for _, v := range r.Verbs {
								printed[grant{v, g, res, name}] = true
							}
						}
					}
				}
			}
			grants, err := install.Grants(entries, c.roleOptions())
			must(t, err)
			needs := access.Beyond(grants, nil)
			asked := map[grant]bool{}
			for _, n := range needs {
				if !namespaces[n.Namespace] {
					t.Errorf("%s: asked in namespace %q, which the config does not name", what, n.Namespace)
				}
				res := n.GVR.Resource
				if n.Subresource != "" {
					res += "/" + n.Subresource
				}
				for _, v := range n.Verbs {
					asked[grant{v, n.GVR.Group, res, n.Name}] = true
				}
			}
			// A role leaves out an object's rule where it grants the verb
			// on the whole resource.
			for g := range asked {
				if g.name != "" && asked[grant{g.verb, g.group, g.resource, ""}] {
					delete(asked, g)
				}
			}
			for g := range printed {
				if !asked[g] {
					t.Errorf("%s: stencil rbac grants %v; a reload does not ask it", what, g)
				}
			}
			for g := range asked {
				if !printed[g] {
					t.Errorf("%s: a reload asks %v; stencil rbac does not grant it", what, g)
				}
			}
		}
	}
}

func TestReloadAddingAReadStencilMayNotListIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir, registryConfig(t, false, false))
	kube := newReviewer("list secrets", "watch secrets")
	p := startPlaneKube(t, path, kube, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"),
		webapp("a", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("webapps is served and reconciled", func() bool { return p.served(webappGVR) && p.applied(deploymentGVR, "a") })
	before := p.c.reg.Parent(webappGVR)

	// The entry gains a read of the Secret its spec names.
	writeConfig(t, dir, registryConfig(t, false, false)+
		"    reads:\n      - {name: db, apiVersion: v1, kind: Secret, objectName: \"{{ .Name }}-db\"}\n")
	cfg, sets := loadConfig(t, path)
	err := p.c.Reconfigure(p.ctx, cfg, sets)
	want := "reload refused: stencil may not list, watch secrets in all namespaces (RBAC)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Reconfigure = %v, want an error saying %q", err, want)
	}
	if got := kube.askedFor("secrets", ""); strings.Join(got, ",") != strings.Join(install.ReadVerbs, ",") {
		t.Errorf("verbs reviewed for secrets = %v, want %v", got, install.ReadVerbs)
	}
	// The running config keeps serving, without the read.
	if got := p.c.reg.Parent(webappGVR); got.Set != before.Set || len(got.Res.Reads) != 0 {
		t.Errorf("webapps entry = %+v, want the running one", got)
	}
	p.create(webappGVR, webapp("b", map[string]any{"replicas": int64(1), "image": "nginx"}))
	p.eventually("the new WebApp's Deployment is applied", func() bool { return p.applied(deploymentGVR, "b") })
	if p.watching(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}) {
		t.Error("a refused reload watched Secrets")
	}
}
