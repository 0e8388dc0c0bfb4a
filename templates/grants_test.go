package templates

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stencil.dev/stencil/config"
)

// A Secret of type kubernetes.io/service-account-token is given a token of
// the ServiceAccount it names: like Role and RoleBinding it grants
// permissions, and needs allowPermissionGrants. bitnami's extraDeploy lets
// a tenant render one whenever the chart may render Secrets.
func TestServiceAccountTokenSecretNeedsPermissionGrants(t *testing.T) {
	nginx, err := filepath.Abs(filepath.Join("chart", "testdata", "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	token := map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
		"metadata": map[string]any{"name": "tok", "annotations": map[string]any{"kubernetes.io/service-account.name": "default"}}}
	opaque := map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": map[string]any{"name": "plain"}}
	for _, allow := range []bool{false, true} {
		dir := t.TempDir()
		text := "resources:\n  - group: charts.example.com\n    version: v1\n    resource: nginxes\n    chart: " + nginx + "\n"
		if allow {
			text += "    allowPermissionGrants: true\n"
		}
		path := filepath.Join(dir, "stencil.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		set, err := Load(cfg, cfg.Resources[0], Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := parent()
		p.Spec = map[string]any{"extraDeploy": []any{opaque}, "tls": map[string]any{"enabled": false}}
		if _, err := set.Render(p); err != nil {
			t.Fatalf("allowPermissionGrants %v: an Opaque Secret: %v", allow, err)
		}
		p.Spec = map[string]any{"extraDeploy": []any{opaque, token}, "tls": map[string]any{"enabled": false}}
		children, err := set.Render(p)
		switch {
		case !allow && (err == nil || !strings.Contains(err.Error(), "kubernetes.io/service-account-token grants permissions") || !strings.Contains(err.Error(), "allowPermissionGrants")):
			t.Errorf("a token Secret without allowPermissionGrants: err = %v, want it refused naming the rule", err)
		case allow && err != nil:
			t.Errorf("a token Secret with allowPermissionGrants: %v", errors.Unwrap(err))
		case allow && len(children) == 0:
			t.Errorf("no children")
		}
	}
}
