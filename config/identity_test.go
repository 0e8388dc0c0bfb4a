package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestIdentityDecodes reads both forms of an entry's identity and the user
// each impersonates; testdata/errors/identity-wrong.yaml holds the errors.
func TestIdentityDecodes(t *testing.T) {
	cfg, err := ParseConfig(cfgPath, []byte(`
resources:
  - group: apps.example.com
    version: v1
    resource: webapps
    templates: [web/deployment.yaml.tmpl]
    identity: {serviceAccount: webapp-writer, namespace: stencil-system}
  - group: apps.example.com
    version: v1
    resource: builds
    templates: [web/deployment.yaml.tmpl]
    identity: {tenant: builder}
  - group: apps.example.com
    version: v1
    resource: plains
    templates: [web/deployment.yaml.tmpl]
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"system:serviceaccount:stencil-system:webapp-writer", "system:serviceaccount:team-a:builder"} {
		if got := cfg.Resources[i].Identity.User("team-a"); got != want {
			t.Errorf("resources[%d] writes as %q in team-a, want %q", i, got, want)
		}
	}
	if cfg.Resources[2].Identity != nil {
		t.Errorf("resources[2] has identity %v without one in the file", cfg.Resources[2].Identity)
	}

	def, err := ParseDefaultIdentity("tenant:deployer")
	if err != nil {
		t.Fatal(err)
	}
	cfg.WithDefaultIdentity(def)
	if got := cfg.Resources[2].Identity.User("team-b"); got != "system:serviceaccount:team-b:deployer" {
		t.Errorf("with --default-identity, resources[2] writes as %q", got)
	}
	if got := cfg.Resources[0].Identity.String(); got != "serviceAccount stencil-system/webapp-writer" {
		t.Errorf("an entry's own identity gave way to the default: %s", got)
	}
}

// TestParseDefaultIdentityRefuses checks that --default-identity takes
// tenant:NAME alone, with a valid name.
func TestParseDefaultIdentityRefuses(t *testing.T) {
	for _, s := range []string{"builder", "tenant:", "tenant:Bad_Name", "serviceaccount:x", "user:admin"} {
		if _, err := ParseDefaultIdentity(s); err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("ParseDefaultIdentity(%q) = %v, want an error naming the value", s, err)
		}
	}
}

// TestWatchesIdentity reads stencil's identity extension of a watches
// file, and refuses a wrong one naming the watch and the field.
func TestWatchesIdentity(t *testing.T) {
	resolve := func(gvk schema.GroupVersionKind) (string, error) { return "hellos", nil }
	chart, _ := filepath.Abs(filepath.Join("..", "crds", "charts", "hello"))
	path := filepath.Join(t.TempDir(), "watches.yaml")
	write := func(identity string) {
		t.Helper()
		data := "- {group: charts.example.com, version: v1, kind: Hello, chart: " + chart + ", identity: " + identity + "}\n"
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("{tenant: builder}")
	cfg, err := LoadWatches(path, resolve)
	if err != nil {
		t.Fatal(err)
	}
	if id := cfg.Resources[0].Identity; id == nil || id.Tenant != "builder" {
		t.Errorf("identity %v, want tenant builder", id)
	}
	write("{tenant: builder, serviceAccount: x, namespace: y}")
	_, err = LoadWatches(path, resolve)
	if want := "watches[0] (charts.example.com/v1, Kind=Hello): identity: sets both tenant"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v lacks %q", err, want)
	}
}
