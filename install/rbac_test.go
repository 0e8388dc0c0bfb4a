package install

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/entry"
)

// The -update flag may also be defined by another test file in this package;
// define it only if nobody has, and read it through flag.Lookup.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// compiled compiles cfg's entries.
func compiled(t *testing.T, cfg *config.Config) []*entry.Entry {
	t.Helper()
	entries, err := entry.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestClusterRoleMatchesDeploy keeps deploy/base/clusterrole.yaml and ClusterRole
// from drifting apart: the checked-in file is byte for byte what ClusterRole
// (and so "stencil rbac --config crds/stencil.yaml") renders for the example
// config. Run with -update to rewrite it.
func TestClusterRoleMatchesDeploy(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role, err := ClusterRole("stencil", compiled(t, cfg), RoleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "deploy", "base", "clusterrole.yaml")
	if updateGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; run go test ./install -run ClusterRole -update\ngot:\n%s\nwant:\n%s", path, got, want)
	}
	got, err = yaml.Marshal(LeaseRole("stencil-leader-election"))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join("..", "deploy", "base", "role.yaml")
	if updateGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err = os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is stale (%v); run go test ./install -run ClusterRole -update", path, err)
	}
}

func TestClusterRoleRules(t *testing.T) {
	cfg := &config.Config{Path: "s.yaml", Resources: []config.Resource{
		{Group: "b.example.com", Version: "v1", Resource: "foos"},
		{Group: "b.example.com", Version: "v1", Resource: "bars", Children: []config.ChildKind{
			{APIVersion: "apps/v1", Kind: "Deployment"}, {APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}}},
		{Group: "a.example.com", Version: "v2", Resource: "bazs", Children: []config.ChildKind{
			{APIVersion: "example.io/v1", Kind: "Widget", Resource: "widgets"}}},
	}}
	role, err := ClusterRole("x", compiled(t, cfg), RoleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if role.Name != "x" || role.Kind != "ClusterRole" || role.APIVersion != "rbac.authorization.k8s.io/v1" {
		t.Errorf("metadata = %v %v %v", role.Name, role.Kind, role.APIVersion)
	}
	type rule struct{ group, resources, verbs string }
	var got []rule
	for _, r := range role.Rules {
		if len(r.APIGroups) != 1 {
			t.Fatalf("rule %v: want one API group", r)
		}
		got = append(got, rule{r.APIGroups[0], strings.Join(r.Resources, ","), strings.Join(r.Verbs, ",")})
	}
	want := []rule{
		{"", "events", "create,patch"},
		// A ring divides the namespaces that exist.
		{"", "namespaces", "list,watch"},
		// Only foos (no children list) renders Services.
		{"", "services", "get,list,watch,create,patch,delete"},
		{"a.example.com", "bazs", "get,list,watch"},
		{"a.example.com", "bazs/finalizers", "update"},
		{"a.example.com", "bazs/status", "patch"},
		{"apiextensions.k8s.io", "customresourcedefinitions", "list,watch"},
		{"apps", "deployments", "get,list,watch,create,patch,delete"},
		// Resources of one group that need the same verbs share a rule.
		{"b.example.com", "bars,foos", "get,list,watch"},
		{"b.example.com", "bars/finalizers,foos/finalizers", "update"},
		{"b.example.com", "bars/status,foos/status", "patch"},
		{"example.io", "widgets", "get,list,watch,create,patch,delete"},
		{"policy", "poddisruptionbudgets", "get,list,watch,create,patch,delete"},
	}
	if len(got) != len(want) {
		t.Fatalf("rules:\n got %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d = %v, want %v", i, got[i], want[i])
		}
	}
	// A kind whose plural stencil does not know, and the entry does not
	// give, is an error naming the entry.
	cfg.Resources[2].Children[0].Resource = ""
	if _, err := ClusterRole("x", compiled(t, cfg), RoleOptions{}); err == nil || !strings.Contains(err.Error(), "resources[2]") || !strings.Contains(err.Error(), "Widget") {
		t.Errorf("ClusterRole with an unknown plural: err = %v, want one naming resources[2] and Widget", err)
	}
}

// TestGrantsWhereAndResolve: a grant says where stencil uses it (the
// entry's namespaces, narrowed by Scope; a fixed read's own namespace),
// and a running stencil names through Resolve the kinds stencil's table
// does not know, leaving out those it cannot name either.
func TestGrantsWhereAndResolve(t *testing.T) {
	cfg := &config.Config{Path: "s.yaml", Resources: []config.Resource{
		{Group: "b.example.com", Version: "v1", Resource: "foos", Namespaces: []string{"team-b", "team-a"},
			Children: []config.ChildKind{{APIVersion: "example.io/v1", Kind: "Widget"}},
			Reads: []config.Read{
				{Name: "ca", APIVersion: "v1", Kind: "Secret", ObjectName: "ca", Namespace: "platform"},
				{Name: "gadget", APIVersion: "example.io/v1", Kind: "Gadget", ObjectName: "{{ .Name }}"},
			}},
	}}
	entries := compiled(t, cfg)
	if _, err := Grants(entries, RoleOptions{}); err == nil || !strings.Contains(err.Error(), "Widget") || !strings.Contains(err.Error(), "Gadget") {
		t.Errorf("Grants without Resolve: err = %v, want one naming Widget and Gadget", err)
	}
	o := RoleOptions{
		Scope: func(ns []string) []string {
			return slices.DeleteFunc(slices.Clone(ns), func(n string) bool { return n != "team-a" })
		},
		Resolve: func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
			if gvk.Kind == "Widget" {
				return gvk.GroupVersion().WithResource("widgets"), true
			}
			return schema.GroupVersionResource{}, false
		},
	}
	grants, err := Grants(entries, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range grants {
		got = append(got, fmt.Sprintf("%s %s %q %v %q", g.Group, g.Resource, g.Names, g.Verbs, g.Namespaces))
	}
	want := []string{
		`b.example.com foos [] [get list watch] ["team-a"]`,
		`b.example.com foos/status [] [patch] ["team-a"]`,
		`b.example.com foos/finalizers [] [update] ["team-a"]`,
		`example.io widgets [] [get list watch create patch delete] ["team-a"]`,
		// --namespace does not narrow the namespace the platform fixed.
		` secrets ["ca"] [get list watch] ["platform"]`,
		// Cluster-scoped: every namespace, "".
		`apiextensions.k8s.io customresourcedefinitions [] [list watch] [""]`,
		` events [] [create patch] ["team-a"]`,
		` namespaces [] [list watch] [""]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("grants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
