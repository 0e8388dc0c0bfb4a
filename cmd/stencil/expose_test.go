package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docsEntry returns the nginx entry of docs/configuration.md's example, as
// written there.
func docsEntry(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	end := strings.Index(text, "resource: nginxes")
	start := strings.LastIndex(text[:end], "  - group:")
	stop := start + strings.Index(text[start:], "\n```")
	if end < 0 || start < 0 || stop < start {
		t.Fatal("docs/configuration.md has no nginx entry")
	}
	return "resources:\n" + text[start:stop] + "\n"
}

// expose is enforced where stencil renders, not only by the CRD: the
// docs' nginx entry, rendered as written, with a resource that sets what
// the entry does not expose (as a CRD migrated from helm-operator, or no
// CRD at all, would let through). Before, the chart got the whole spec:
// privileged, hostNetwork and an extraDeploy object rendered; and the
// example rendered nothing (its default TLS calls genCA).
func TestExposeEnforcedAtRender(t *testing.T) {
	dir := t.TempDir()
	chartDir, err := filepath.Abs(filepath.Join(chartData, "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chartDir, filepath.Join(dir, "charts", "nginx")); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "stencil.yaml")
	writeTestFile(t, config, docsEntry(t))
	cr := filepath.Join(dir, "cr.yaml")
	writeTestFile(t, cr, `apiVersion: web.example.com/v1
kind: Nginx
metadata: {name: web, namespace: team-a}
spec:
  image: {tag: "1.27", repository: evil.example.com/nginx}
  replicaCount: 2
  containerSecurityContext: {privileged: true, runAsUser: 0}
  hostNetwork: true
  extraDeploy:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: evil}}
`)
	r := stencil(t, "", "render", "--config", config, "-f", cr)
	r.expect(t, 0, []string{"replicas: 2", "image: docker.io/bitnami/nginx:1.27", "hostNetwork: false"}, []string{
		"not given to the chart (not in the entry's API): spec.containerSecurityContext",
		"not given to the chart (not in the entry's API): spec.extraDeploy",
		"not given to the chart (not in the entry's API): spec.hostNetwork",
		"not given to the chart (not in the entry's API): spec.image.repository",
	})
	for _, bad := range []string{"privileged: true", "runAsUser: 0", "hostNetwork: true", "name: evil", "evil.example.com"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the render holds %q, a value outside the entry's API", bad)
		}
	}
}

// A key holding U+0085 (NEL), a line break to YAML 1.1, is refused naming
// the template, where the key is and why; before, `stencil render`
// failed with a raw YAML parser error naming nothing.
func TestNELKeyIsRefusedNamingTheTemplate(t *testing.T) {
	dir := t.TempDir()
	chartDir, err := filepath.Abs(filepath.Join(chartData, "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "stencil.yaml")
	writeTestFile(t, config, "resources:\n  - group: web.example.com\n    version: v1\n    resource: nginxes\n    chart: "+chartDir+
		"\n    overrideValues: {tls.enabled: \"false\"}\n")
	cr := filepath.Join(dir, "cr.yaml")
	writeTestFile(t, cr, "apiVersion: web.example.com/v1\nkind: Nginx\nmetadata: {name: web, namespace: team-a}\nspec:\n  commonAnnotations: {\"a\\x85b\": x}\n")
	r := stencil(t, "", "render", "--config", config, "-f", cr)
	r.expect(t, 1, []string{}, []string{`nginx/templates/svc.yaml: the key "a\u0085b" at .metadata.annotations holds U+0085 (NEL), which YAML reads as a line break`})
	if strings.Contains(r.stderr, "did not find expected") {
		t.Errorf("a raw YAML parser error:\n%s", r.stderr)
	}
}
