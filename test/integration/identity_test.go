//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/plan"
	"stencil.dev/stencil/controller/reads"
	stencilreload "stencil.dev/stencil/controller/reload"
)

// Writing as the tenant (DESIGN.md, "Writing as the tenant (identity)"),
// on the real API server with RBAC and OwnerReferencesPermissionEnforcement
// on: the controller runs with the test's admin credentials, and every
// child write impersonates the tenant's account, whose RBAC the API
// server checks.

// writeLog records each mutating request and the user it impersonates.
type writeLog struct {
	mu     sync.Mutex
	writes []loggedWrite
}

// loggedWrite is one mutating request: its method, "resource[/sub]",
// namespace and Impersonate-User header.
type loggedWrite struct {
	method, resource, namespace, as string
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.URL.Query().Get("dryRun") == "" {
			l.mu.Lock()
			l.writes = append(l.writes, loggedWrite{method: r.Method, resource: resourceOf(r.URL.Path),
				namespace: namespaceOf(r.URL.Path), as: r.Header.Get("Impersonate-User")})
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (l *writeLog) all() []loggedWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedWrite(nil), l.writes...)
}

// namespaceOf turns /apis/apps/v1/namespaces/x/deployments/y into "x".
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" {
			return parts[i+1]
		}
	}
	return ""
}

// readyConditionOf returns the Ready condition of u, or nil.
func readyConditionOf(u *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			return m
		}
	}
	return nil
}

// TestIdentityTenantWritesWithItsOwnRBAC: WebApps whose entry says
// identity: {tenant: builder}. In a namespace whose builder may write
// Deployments (and the WebApps' finalizers, for blockOwnerDeletion) but
// not Services, the Deployment is written and the WebApp says Forbidden,
// naming the account, the verb and the Service; binding the Services Role
// makes it Ready within 30s, without a restart. In a namespace without
// the account, the WebApp says IdentityNotFound and nothing is written.
// Every child write carries Impersonate-User; status patches and events
// do not.
func TestIdentityTenantWritesWithItsOwnRBAC(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	suffix := time.Now().UnixNano() % 100000
	withSA, withoutSA := fmt.Sprintf("it-identity-%d", suffix), fmt.Sprintf("it-identity-nosa-%d", suffix)
	newNamespace(ctx, t, admin, withSA)
	newNamespace(ctx, t, admin, withoutSA)
	user := "system:serviceaccount:" + withSA + ":builder"

	// builder may write Deployments and the WebApps' finalizers; the
	// Services Role exists but is not bound yet.
	if _, err := kube.CoreV1().ServiceAccounts(withSA).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roles := []*rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: "builder-deployments"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "patch", "delete"}},
			{APIGroups: []string{"apps.example.com"}, Resources: []string{"webapps/finalizers"}, Verbs: []string{"update"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "builder-services"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "patch", "delete"}},
		}},
	}
	for _, r := range roles {
		if _, err := kube.RbacV1().Roles(withSA).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(role string) {
		t.Helper()
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: withSA}}}
		if _, err := kube.RbacV1().RoleBindings(withSA).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("builder-deployments")

	crds, err := filepath.Abs(filepath.Join(root, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stencil.yaml")
	config := `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [` + crds + `/webapp/deployment.yaml.tmpl, ` + crds + `/webapp/service.yaml.tmpl]
    namespaces: [` + withSA + `, ` + withoutSA + `]
    identity: {tenant: builder}
`
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	// The controller's clients, and the impersonating ones, log every
	// write with its Impersonate-User header.
	log := &writeLog{}
	logged := rest.CopyConfig(cfg)
	logged.Wrap(log.wrap)
	cnt := &counter{mutating: map[string]int{}}
	counted := rest.CopyConfig(logged)
	counted.Wrap(cnt.wrap)
	imp, err := controller.NewImpersonators(counted)
	if err != nil {
		t.Fatal(err)
	}
	r := startWith(t, logged, cnt, "", path, func(o *controller.Options) { o.Impersonate = imp.Client })
	defer func() { r.stop(t) }()

	spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "port": int64(8080)}
	for _, ns := range []string{withSA, withoutSA} {
		if _, err := createOnce(ctx, admin.Resource(webapps).Namespace(ns), cr(webapps, "WebApp", ns, "web", spec)); err != nil {
			t.Fatal(err)
		}
	}
	condition := func(ns string) map[string]any {
		u, err := admin.Resource(webapps).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return readyConditionOf(u)
	}

	// The Deployment is written as builder; the Service is refused.
	var forbidden map[string]any
	poll(t, time.Minute, "the WebApp Forbidden, with its Deployment", func() (bool, error) {
		forbidden = condition(withSA)
		_, err := admin.Resource(deployments).Namespace(withSA).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && forbidden != nil && forbidden["reason"] == "Forbidden", nil
	})
	msg := fmt.Sprint(forbidden["message"])
	for _, want := range []string{user + " may not create Service in namespace " + withSA, "Service/web"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Forbidden message %q lacks %q", msg, want)
		}
	}
	if _, err := admin.Resource(services).Namespace(withSA).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Service builder may not create exists (err %v)", err)
	}
	events, err := kube.CoreV1().Events(withSA).List(ctx, metav1.ListOptions{FieldSelector: "reason=Forbidden"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Count > 1 {
		t.Errorf("%d Forbidden events (first counted %v), want one", len(events.Items), func() any {
			if len(events.Items) > 0 {
				return events.Items[0].Count
			}
			return nil
		}())
	}

	// No account: a clear reason, nothing written.
	poll(t, time.Minute, "the WebApp without an account IdentityNotFound", func() (bool, error) {
		c := condition(withoutSA)
		return c != nil && c["reason"] == "IdentityNotFound", nil
	})
	if c := condition(withoutSA); !strings.Contains(fmt.Sprint(c["message"]), "ServiceAccount "+withoutSA+"/builder does not exist") {
		t.Errorf("IdentityNotFound message %q does not name the account", c["message"])
	}
	if l, err := admin.Resource(deployments).Namespace(withoutSA).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		t.Errorf("Deployments written without an account: %v (err %v)", len(l.Items), err)
	}
	if l, err := admin.Resource(services).Namespace(withoutSA).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		t.Errorf("Services written without an account: %v (err %v)", len(l.Items), err)
	}

	// stencil diff dry-runs as the identity: it shows the same refusals.
	cl, err := controller.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	diffConf, diffSets, err := stencilreload.Source{Path: path}.Load()
	if err != nil {
		t.Fatal(err)
	}
	diffImp, err := controller.NewImpersonators(cfg)
	if err != nil {
		t.Fatal(err)
	}
	report, err := (&plan.Planner{Config: diffConf, Sets: diffSets, Dynamic: cl.Dynamic, Metadata: cl.Metadata, Mapper: cl.Mapper,
		Impersonate: diffImp.Client, Workers: 2}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]string{}
	for _, f := range report.Failures {
		planned[f.Parent.Namespace] = f.Reason + ": " + f.Message
	}
	if got := planned[withSA]; !strings.HasPrefix(got, "Forbidden: "+user+" may not create Service") {
		t.Errorf("stencil diff for %s: %q, want Forbidden as %s", withSA, got, user)
	}
	if got := planned[withoutSA]; !strings.HasPrefix(got, "IdentityNotFound: ") {
		t.Errorf("stencil diff for %s: %q, want IdentityNotFound", withoutSA, got)
	}

	// Granting the Role: Ready within 30s, no restart. First the retries
	// back off (the two WebApps retried about a dozen times each, the
	// refused Service failing from memory, not sent again until the
	// recheck 20s after it was refused), so that the grant is seen by the
	// recheck, not by a retry that happens to be due.
	poll(t, 2*time.Minute, "two dozen refused syncs", func() (bool, error) {
		return r.counterValue(t, "stencil_reconcile_total") >= 24, nil
	})
	bind("builder-services")
	granted := time.Now()
	poll(t, 30*time.Second, "the WebApp Ready once builder may write Services", func() (bool, error) {
		u, err := admin.Resource(webapps).Namespace(withSA).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && isReady(u), nil
	})
	t.Logf("Ready %.1fs after the RoleBinding", time.Since(granted).Seconds())

	// Every child write as builder; the status and events as stencil.
	childWrites, statusPatches, eventWrites := 0, 0, 0
	for _, w := range log.all() {
		switch {
		case w.resource == "deployments" || w.resource == "services":
			childWrites++
			if w.namespace != withSA || w.as != user {
				t.Errorf("child write %+v not made as %s in %s", w, user, withSA)
			}
		case w.resource == "webapps/status":
			statusPatches++
			if w.as != "" {
				t.Errorf("status patch %+v impersonates %s", w, w.as)
			}
		case w.resource == "events":
			eventWrites++
			if w.as != "" {
				t.Errorf("event %+v impersonates %s", w, w.as)
			}
		}
	}
	t.Logf("child writes %d (all as %s), status patches %d and event writes %d (all as stencil); mutating requests %v",
		childWrites, user, statusPatches, eventWrites, func() map[string]int { _, by := cnt.snapshot(); return by }())
	if childWrites < 2 || statusPatches < 2 {
		t.Errorf("%d child writes and %d status patches logged, want at least 2 of each", childWrites, statusPatches)
	}
	// The refused Service is sent once per recheck, not once per retry:
	// refused once or twice, then created.
	if n := cnt.writesTo("services/web"); n > 3 {
		t.Errorf("%d writes of services/web, want at most 3 (a refusal is sent again once per recheck)", n)
	}
}

// TestIdentityNoConfusedDeputy tries, as a tenant would, to make stencil
// write what the tenant's own account could not: a Grant renders a Role
// granting get on the resource its spec names (allowPermissionGrants).
// builder holds get on ConfigMaps and may write Roles: a Grant of
// ConfigMaps gets its Role; a Grant of Secrets is refused by the API
// server's escalation check, as builder, although stencil's own
// credentials (the test's admin) could write it. The resource says
// Forbidden and no Role is written.
func TestIdentityNoConfusedDeputy(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("it-deputy-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	user := "system:serviceaccount:" + ns + ":builder"
	const crdName = "grants.deputy.stencil.dev"
	grants := schema.GroupVersionResource{Group: "deputy.stencil.dev", Version: "v1", Resource: "grants"}
	roleGVR := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}

	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "builder"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, Verbs: []string{"create", "patch", "delete"}},
		{APIGroups: []string{"deputy.stencil.dev"}, Resources: []string{"grants/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "builder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "builder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	tmpl := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Name }}
rules:
  - apiGroups: [""]
    resources:
      - {{ .Spec.resource }}
    verbs: [get]
`
	if err := os.WriteFile(filepath.Join(dir, "role.yaml.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(`resources:
  - group: deputy.stencil.dev
    version: v1
    resource: grants
    kind: Grant
    schema:
      spec:
        resource: string | required=true
    templates: [role.yaml.tmpl]
    children: [{apiVersion: rbac.authorization.k8s.io/v1, kind: Role}]
    allowPermissionGrants: true
    identity: {tenant: builder}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	freshCRDs(ctx, t, admin, crdName)
	imp, err := controller.NewImpersonators(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.ManageCRDs, o.Impersonate = true, imp.Client })
	defer func() { r.stop(t) }()
	poll(t, time.Minute, "the Grant CRD, established", func() (bool, error) {
		_, err := admin.Resource(grants).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	for name, res := range map[string]string{"fine": "configmaps", "evil": "secrets"} {
		if _, err := createOnce(ctx, admin.Resource(grants).Namespace(ns), cr(grants, "Grant", ns, name, map[string]any{"resource": res})); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, time.Minute, "the Grant of ConfigMaps Ready, with its Role", func() (bool, error) {
		u, err := admin.Resource(grants).Namespace(ns).Get(ctx, "fine", metav1.GetOptions{})
		if err != nil || !isReady(u) {
			return false, nil
		}
		_, err = admin.Resource(roleGVR).Namespace(ns).Get(ctx, "fine", metav1.GetOptions{})
		return err == nil, nil
	})
	var c map[string]any
	poll(t, time.Minute, "the Grant of Secrets Forbidden", func() (bool, error) {
		u, err := admin.Resource(grants).Namespace(ns).Get(ctx, "evil", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c = readyConditionOf(u)
		return c != nil && c["reason"] == "Forbidden", nil
	})
	msg := fmt.Sprint(c["message"])
	if !strings.Contains(msg, user+" may not create Role in namespace "+ns) {
		t.Errorf("Forbidden message %q does not name %s, create, Role and %s", msg, user, ns)
	}
	t.Logf("refused: %s", msg)
	if _, err := admin.Resource(roleGVR).Namespace(ns).Get(ctx, "evil", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Role granting Secrets was written (err %v)", err)
	}
}

// TestIdentityChartFromWatches: helm-operator's watches.yaml with
// stencil's identity extension. The hello chart's ConfigMap, Deployment
// and Service are written as the tenant's builder, whose Role allows
// exactly them (and the Hellos' finalizers), and the Hello is Ready.
func TestIdentityChartFromWatches(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-identity-chart-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	user := "system:serviceaccount:" + ns + ":builder"
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	write := []string{"create", "patch", "delete"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "builder"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: write},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: write},
		{APIGroups: []string{"charts.example.com"}, Resources: []string{"hellos/finalizers"}, Verbs: []string{"update"}},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "builder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "builder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	chart, err := filepath.Abs(filepath.Join(root, "crds", "charts", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, []byte(`- group: charts.example.com
  version: v1
  kind: Hello
  chart: `+chart+`
  identity: {tenant: builder}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &writeLog{}
	logged := rest.CopyConfig(cfg)
	logged.Wrap(log.wrap)
	imp, err := controller.NewImpersonators(logged)
	if err != nil {
		t.Fatal(err)
	}
	src := stencilreload.Source{Path: path, Watches: true, Resolve: controller.DiscoveryResolver(discovery.NewDiscoveryClientForConfigOrDie(cfg))}
	cnt := &counter{mutating: map[string]int{}}
	r := startSource(t, logged, cnt, ns, src, func(o *controller.Options) { o.Impersonate = imp.Client }, false)
	defer func() { r.stop(t) }()

	if _, err := createOnce(ctx, admin.Resource(hellos).Namespace(ns), cr(hellos, "Hello", ns, "hi", helloSpec())); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "the Hello Ready", func() (bool, error) {
		u, err := admin.Resource(hellos).Namespace(ns).Get(ctx, "hi", metav1.GetOptions{})
		return err == nil && isReady(u), nil
	})
	kinds := map[string]int{}
	for _, w := range log.all() {
		switch w.resource {
		case "configmaps", "deployments", "services":
			kinds[w.resource]++
			if w.as != user {
				t.Errorf("chart child write %+v not made as %s", w, user)
			}
		case "hellos/status", "events":
			if w.as != "" {
				t.Errorf("%+v impersonates %s", w, w.as)
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("child writes by resource %v, want the chart's ConfigMap, Deployment and Service", kinds)
	}
	t.Logf("chart child writes as %s: %v", user, kinds)
}

// TestIdentityReadsOnlyWhatTheTenantMay: a Vault renders a ConfigMap of
// the keys of the Secret its spec names (a computed objectName). builder
// may get the Secret "app" and not the platform's "platform": a Vault of
// app is Ready; a Vault of platform says Forbidden, naming the Secret and
// the account, and nothing of it is read or written, although stencil's
// own informers hold both Secrets. Twenty more Vaults of app add no
// SubjectAccessReview: the reviews are counted, and bounded by one per
// distinct read and reads.ReviewTTL.
func TestIdentityReadsOnlyWhatTheTenantMay(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("it-identity-reads-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	user := "system:serviceaccount:" + ns + ":builder"
	const crdName = "vaults.tenantreads.stencil.dev"
	vaults := schema.GroupVersionResource{Group: "tenantreads.stencil.dev", Version: "v1", Resource: "vaults"}

	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"app", "platform"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{name + "-key": "x"}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "builder"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch", "delete"}},
		{APIGroups: []string{"tenantreads.stencil.dev"}, Resources: []string{"vaults/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"app"}, Verbs: []string{"get"}},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "builder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "builder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	tmpl := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
data:
  keys: {{ keys (read "secret").data | sortAlpha | join "," | quote }}
`
	if err := os.WriteFile(filepath.Join(dir, "keys.yaml.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(`resources:
  - group: tenantreads.stencil.dev
    version: v1
    resource: vaults
    kind: Vault
    schema:
      spec:
        secret: string | required=true
    templates: [keys.yaml.tmpl]
    children: [{apiVersion: v1, kind: ConfigMap}]
    reads:
      - {name: secret, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.secret }}", required: true}
    identity: {tenant: builder}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	freshCRDs(ctx, t, admin, crdName)
	imp, err := controller.NewImpersonators(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.ManageCRDs, o.Impersonate = true, imp.Client })
	defer func() { r.stop(t) }()
	poll(t, time.Minute, "the Vault CRD, established", func() (bool, error) {
		_, err := admin.Resource(vaults).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	// Besides mine and peek, readers more Vaults read app: they share the
	// review of "get secrets app" with mine (reads.ReviewTTL), so the
	// reviews are counted by distinct read and TTL, not by Vault.
	const readers = 20
	created := time.Now()
	vaultsOf := map[string]string{"mine": "app", "peek": "platform"}
	for i := range readers {
		vaultsOf[fmt.Sprintf("mine-%02d", i)] = "app"
	}
	for name, secret := range vaultsOf {
		if _, err := createOnce(ctx, admin.Resource(vaults).Namespace(ns), cr(vaults, "Vault", ns, name, map[string]any{"secret": secret})); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, time.Minute, "the Vault of app Ready, its keys written", func() (bool, error) {
		u, err := admin.Resource(vaults).Namespace(ns).Get(ctx, "mine", metav1.GetOptions{})
		if err != nil || !isReady(u) {
			return false, nil
		}
		cm, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "mine", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		keys, _, _ := unstructured.NestedString(cm.Object, "data", "keys")
		return keys == "app-key", nil
	})
	var peek *unstructured.Unstructured
	poll(t, time.Minute, "the Vault of platform Forbidden", func() (bool, error) {
		u, err := admin.Resource(vaults).Namespace(ns).Get(ctx, "peek", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		peek = u
		c := readyConditionOf(u)
		return c != nil && c["reason"] == "Forbidden", nil
	})
	msg := fmt.Sprint(readyConditionOf(peek)["message"])
	if want := user + " may not get secrets platform in namespace " + ns; !strings.Contains(msg, want) {
		t.Errorf("Forbidden message %q lacks %q", msg, want)
	}
	t.Logf("refused read: %s", msg)
	if data, _ := json.Marshal(peek.Object["status"]); strings.Contains(string(data), "platform-key") {
		t.Errorf("the status shows what the refused read holds: %s", data)
	}
	if _, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "peek", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap of the refused read was written (err %v)", err)
	}
	poll(t, time.Minute, "every Vault of app Ready", func() (bool, error) {
		for name, secret := range vaultsOf {
			u, err := admin.Resource(vaults).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if secret == "app" && (err != nil || !isReady(u)) {
				return false, nil
			}
		}
		return true, nil
	})
	// Two distinct reads (get secrets app, get secrets platform), each
	// reviewed at most once per ReviewTTL: the refused one is looked at
	// again every ReviewTTL, the allowed one when its answer has expired
	// and a Vault renders again.
	elapsed := time.Since(created)
	_, by := cnt.snapshot()
	reviews := by["POST subjectaccessreviews"]
	bound := 2 * (int(elapsed/reads.ReviewTTL) + 1)
	t.Logf("%d Vaults (%d reading the Secret app, 1 the Secret platform): %d SubjectAccessReviews in %s (bound: 2 reads x %d TTLs of %s)",
		len(vaultsOf), len(vaultsOf)-1, reviews, elapsed.Round(time.Millisecond), bound/2, reads.ReviewTTL)
	if reviews < 2 || reviews > bound {
		t.Errorf("%d SubjectAccessReviews for %d Vaults in %s, want 2 to %d: one per distinct read and ReviewTTL", reviews, len(vaultsOf), elapsed, bound)
	}
}
