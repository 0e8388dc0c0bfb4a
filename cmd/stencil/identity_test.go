package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// identityConfig writes a config whose entries all write as an identity:
// webapps as the tenant's builder, memcacheds as one account of the
// platform's, and hellos (a chart entry) as whatever --default-identity
// says. It returns its path.
func identityConfig(t *testing.T) string {
	t.Helper()
	crds, err := filepath.Abs(filepath.Join("..", "..", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stencil.yaml")
	data := `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [` + crds + `/webapp/deployment.yaml.tmpl, ` + crds + `/webapp/service.yaml.tmpl]
    identity: {tenant: builder}
  - group: cache.example.com
    version: v1alpha1
    resource: memcacheds
    templates: [` + crds + `/memcached/deployment.yaml.tmpl]
    children: [{apiVersion: apps/v1, kind: Deployment}, {apiVersion: v1, kind: ConfigMap}]
    identity: {serviceAccount: memcached-writer, namespace: platform}
  - group: charts.example.com
    version: v1
    resource: hellos
    chart: ` + crds + `/charts/hello
`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rolesOf decodes the ClusterRoles of stencil rbac's output, by name.
func rolesOf(t *testing.T, out string) map[string]*rbacv1.ClusterRole {
	t.Helper()
	objs, err := decodeResources([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		roles[r.Name] = &r
	}
	return roles
}

// TestRBACWithEveryEntryOnAnIdentity reads the YAML stencil rbac prints
// for a config whose every entry writes as an identity (the chart entry's
// through --default-identity): stencil's ClusterRole holds no create,
// update, patch or delete on any child kind, get and impersonate on
// exactly the accounts named, and no finalizers; each identity gets a
// ClusterRole with its child kinds' writes and its resources' finalizers.
func TestRBACWithEveryEntryOnAnIdentity(t *testing.T) {
	r := stencil(t, "", "rbac", "--config", identityConfig(t), "--default-identity", "tenant:deployer")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	roles := rolesOf(t, r.stdout)
	own := roles["stencil"]
	if own == nil {
		t.Fatalf("no ClusterRole stencil in:\n%s", r.stdout)
	}
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "*"}
	parents := map[string]bool{"webapps": true, "memcacheds": true, "hellos": true}
	var accounts []string
	for _, rule := range own.Rules {
		for _, res := range rule.Resources {
			switch {
			case res == "events" || strings.HasSuffix(res, "/status") || parents[res]:
				// The parents (a chart entry's is patched to release
				// helm-operator's finalizer), their status and events stay
				// stencil's; what is checked is every child kind.
			case res == "serviceaccounts":
				if !slices.Equal(rule.Verbs, []string{"get", "impersonate"}) || len(rule.ResourceNames) == 0 {
					t.Errorf("stencil's rule on serviceaccounts %v: want get and impersonate by name", rule)
				}
				accounts = append(accounts, rule.ResourceNames...)
			case strings.HasSuffix(res, "/finalizers"):
				t.Errorf("stencil holds %v on %s: the identities write the children", rule.Verbs, res)
			default:
				for _, v := range rule.Verbs {
					if slices.Contains(writes, v) {
						t.Errorf("stencil's ClusterRole grants %s on %s (rule %v) with every entry on an identity", v, res, rule)
					}
				}
			}
		}
	}
	if slices.Sort(accounts); !slices.Equal(accounts, []string{"builder", "deployer", "memcached-writer"}) {
		t.Errorf("stencil may impersonate %v, want exactly builder, deployer and memcached-writer", accounts)
	}

	want := map[string][]string{
		"stencil-identity-tenant-builder": {"/services create,patch,delete", "apps.example.com/webapps/finalizers update", "apps/deployments create,patch,delete"},
		"stencil-identity-serviceaccount-platform-memcached-writer": {"/configmaps create,patch,delete",
			"apps/deployments create,patch,delete", "cache.example.com/memcacheds/finalizers update"},
	}
	for name, rules := range want {
		role := roles[name]
		if role == nil {
			t.Errorf("no ClusterRole %s for the identity in:\n%s", name, r.stdout)
			continue
		}
		var got []string
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				got = append(got, rule.APIGroups[0]+"/"+res+" "+strings.Join(rule.Verbs, ","))
			}
		}
		if slices.Sort(got); !slices.Equal(got, rules) {
			t.Errorf("%s rules %v, want %v", name, got, rules)
		}
	}
	if roles["stencil-identity-tenant-deployer"] == nil {
		t.Errorf("--default-identity tenant:deployer printed no role for it")
	}
}

// TestDefaultIdentityFlagRefusesOtherForms: --default-identity takes
// tenant:NAME and nothing else.
func TestDefaultIdentityFlagRefusesOtherForms(t *testing.T) {
	r := stencil(t, "", "rbac", "--config", identityConfig(t), "--default-identity", "admin")
	if r.code != 2 || !strings.Contains(r.stderr, "want tenant:NAME") {
		t.Errorf("exit %d, stderr %s; want 2 and the form it takes", r.code, r.stderr)
	}
}

// TestManifestsWithDefaultIdentity: stencil manifests --default-identity
// runs stencil with the flag, grants stencil's ClusterRole what rbac grants
// for it, and includes the identity's role, unbound.
func TestManifestsWithDefaultIdentity(t *testing.T) {
	out, objs := manifestsOf(t, "--config", exampleConfig, "--default-identity", "tenant:builder")
	if !strings.Contains(out, "- --default-identity=tenant:builder") {
		t.Errorf("the Deployment does not run with --default-identity=tenant:builder:\n%s", out)
	}
	r := stencil(t, "", "rbac", "--config", exampleConfig, "--default-identity", "tenant:builder")
	if r.code != 0 {
		t.Fatalf("stencil rbac: exit %d: %s", r.code, r.stderr)
	}
	printed := rolesOf(t, r.stdout)
	var found []string
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" {
			if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); strings.Contains(ref, "identity") {
				t.Errorf("manifests bind the identity's role %s: binding it is the platform's", ref)
			}
		}
		if o.GetKind() != "ClusterRole" {
			continue
		}
		found = append(found, o.GetName())
		want := printed[o.GetName()]
		if want == nil {
			t.Errorf("manifests print ClusterRole %s, rbac does not", o.GetName())
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		if got, want := fmt.Sprint(rules), fmt.Sprint(rulesOf(t, want)); got != want {
			t.Errorf("%s: manifests' rules\n%s\nrbac's\n%s", o.GetName(), got, want)
		}
	}
	if slices.Sort(found); !slices.Equal(found, []string{"stencil", "stencil-identity-tenant-builder"}) {
		t.Errorf("manifests' ClusterRoles %v, want stencil and stencil-identity-tenant-builder", found)
	}
}

// rulesOf is a role's rules as unstructured decodes them.
func rulesOf(t *testing.T, r *rbacv1.ClusterRole) []any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u, "rules")
	return rules
}
