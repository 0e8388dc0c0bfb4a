package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The worked example of reads (crds/reads): a Site reads the platform's
// defaults, the Secret its spec names, and its peers.
var (
	readsConfig  = filepath.Join("..", "..", "crds", "reads", "stencil.yaml")
	readsSample  = filepath.Join("..", "..", "crds", "reads", "samples", "site.yaml")
	readsObjects = filepath.Join("..", "..", "crds", "reads", "samples", "reads.yaml")
)

// TestRenderReads: with --reads, the Site renders from what it read and
// stderr says what that was; the Secret's data appears nowhere; without
// the Secret, it waits, as the controller would, and renders nothing.
func TestRenderReads(t *testing.T) {
	r := stencil(t, "", "render", "--config", readsConfig, "-f", readsSample, "--reads", readsObjects)
	r.expect(t, 0, []string{"image: registry.internal/shop:1.4", "value: blog,shop", "key: password"},
		[]string{"reads ConfigMap stencil-system/platform-defaults", "reads Secret team-a/shop-db", "reads Site team-a/blog"})
	data, err := os.ReadFile(readsObjects)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "c2VjcmV0LXZhbHVl") {
		t.Fatal("the sample Secret no longer holds the data this test looks for")
	}
	if strings.Contains(r.stdout, "c2VjcmV0LXZhbHVl") || strings.Contains(r.stdout, "secret-value") {
		t.Errorf("a Secret read without secretData printed its data:\n%s", r.stdout)
	}

	r = stencil(t, "", "render", "--config", readsConfig, "-f", readsSample)
	r.expect(t, 0, nil, []string{"waits: required read Secret team-a/shop-db does not exist"})
}

// TestValidateRefusesBadReads: a computed namespace, a name and a
// selector at once, and a template using a handle the entry does not
// declare are refused, each naming the file, the entry and the field.
func TestValidateRefusesBadReads(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.tmpl"), "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Name }}}\nspec: {clusterIP: {{ (read \"gateway\").spec.clusterIP }}}\n")
	config := func(reads string) string {
		path := filepath.Join(dir, "stencil.yaml")
		write(t, path, "resources:\n  - group: apps.example.com\n    version: v1\n    resource: webapps\n    templates: [t.tmpl]\n    reads:\n"+reads)
		return path
	}
	for _, c := range []struct{ name, reads, want string }{
		{"computed namespace", "      - {name: gateway, apiVersion: v1, kind: Service, objectName: gw, namespace: \"{{ .Spec.ns }}\"}\n",
			"resources[0] (webapps.v1.apps.example.com): reads[0].namespace: a namespace is fixed by the platform, never computed"},
		{"name and selector", "      - {name: gateway, apiVersion: v1, kind: Service, objectName: gw, selector: {matchLabels: {a: b}}}\n",
			"resources[0] (webapps.v1.apps.example.com): reads[0]: needs objectName or selector, not both"},
		{"undeclared handle", "      - {name: gw, apiVersion: v1, kind: Service, objectName: gw}\n",
			"resources[0] (webapps.v1.apps.example.com): templates[0]: t.tmpl: read \"gateway\": the entry declares no such read (reads: gw)"},
	} {
		path := config(c.reads)
		r := stencil(t, "", "validate", "--config", path)
		if r.code == 0 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want a refusal naming %s and %q:\n%s", c.name, r.code, path, c.want, r.stderr)
		}
	}
}

// TestRBACGrantsReads: stencil rbac grants get, list and watch on exactly
// the read kinds: by name where the platform fixed it, the kind where a
// tenant computes it; nothing else.
func TestRBACGrantsReads(t *testing.T) {
	r := stencil(t, "", "rbac", "--config", readsConfig)
	if r.code != 0 {
		t.Fatalf("stencil rbac: exit %d: %s", r.code, r.stderr)
	}
	var role struct {
		Rules []struct {
			APIGroups     []string `json:"apiGroups"`
			Resources     []string `json:"resources"`
			ResourceNames []string `json:"resourceNames"`
			Verbs         []string `json:"verbs"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal([]byte(strings.Split(r.stdout, "\n---\n")[0]), &role); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			key := rule.APIGroups[0] + "/" + res
			if len(rule.ResourceNames) > 0 {
				key += "[" + strings.Join(rule.ResourceNames, ",") + "]"
			}
			got[key] = strings.Join(rule.Verbs, ",")
		}
	}
	for key, verbs := range map[string]string{
		"/configmaps[platform-defaults]": "get,list,watch",
		"/secrets":                       "get,list,watch",
		"sites.example.com/sites":        "get,list,watch",
	} {
		if got[key] != verbs {
			t.Errorf("rule %s: verbs %q, want %q (rules: %v)", key, got[key], verbs, got)
		}
	}
	if v, ok := got["/configmaps"]; ok {
		t.Errorf("every ConfigMap is readable (%s), not the one the platform fixed", v)
	}
}
