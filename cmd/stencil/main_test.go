package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml")

var (
	exampleConfig = filepath.Join("..", "..", "crds", "stencil.yaml")
	webappSample  = filepath.Join("..", "..", "crds", "samples", "webapp.yaml")
	cacheSample   = filepath.Join("..", "..", "crds", "samples", "memcached.yaml")
)

type result struct {
	code           int
	stdout, stderr string
}

// stencil runs the command line in-process, as main would.
func stencil(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	// The offline commands must never look at a cluster.
	t.Setenv("KUBECONFIG", "/nonexistent")
	var out, errOut bytes.Buffer
	code := dispatch(args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func (r result) expect(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if stdout == nil && r.stdout != "" {
		t.Errorf("unexpected stdout:\n%s", r.stdout)
	}
	if stderr == nil && r.stderr != "" {
		t.Errorf("unexpected stderr:\n%s", r.stderr)
	}
}

func TestUsage(t *testing.T) {
	stencil(t, "").expect(t, 2, nil, []string{"Usage: stencil <command>"})
	stencil(t, "", "frobnicate").expect(t, 2, nil, []string{`unknown command "frobnicate"`, "Usage: stencil"})
	stencil(t, "", "help").expect(t, 0, []string{"Usage: stencil <command>", "validate"}, nil)
	stencil(t, "", "-h").expect(t, 0, []string{"Usage: stencil <command>"}, nil)
	for _, cmd := range []string{"validate", "render", "rbac", "argocd", "version"} {
		stencil(t, "", cmd, "-h").expect(t, 0, []string{"Usage: stencil " + cmd}, nil)
		stencil(t, "", cmd, "--no-such-flag").expect(t, 2, nil, []string{"flag provided but not defined: -no-such-flag", "Usage: stencil " + cmd})
	}
	stencil(t, "", "version", "extra").expect(t, 2, nil, []string{`unexpected argument "extra"`})
}

func TestVersion(t *testing.T) {
	stencil(t, "", "version").expect(t, 0, []string{"stencil dev\n"}, nil)
}

func TestValidate(t *testing.T) {
	stencil(t, "", "validate", "--config", exampleConfig).
		expect(t, 0, []string{exampleConfig + ": 4 resources, 8 templates, 2 status templates, 1 chart OK\n"}, nil)
	stencil(t, "", "validate", "--config", "nope.yaml").expect(t, 2, nil, []string{"nope.yaml"})
}

func TestValidatePrintsEveryError(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bad.tmpl"), "{{ .Name ")
	write(t, filepath.Join(dir, "ok.tmpl"), "{{ .Name }}")
	cfg := filepath.Join(dir, "stencil.yaml")

	// Config errors: all of them, one per line, grouped by entry.
	write(t, cfg, `resources:
  - group: apps.example.com
    version: v1
    resource: WebApps
    templates: [ok.tmpl, gone.tmpl]
    extra: 1
  - group: apps.example.com
    version: v1
    resource: things
    templates: [ok.tmpl]
    namespaces: [Bad_NS]
`)
	r := stencil(t, "", "validate", "--config", cfg)
	r.expect(t, 2, nil, []string{
		cfg + `: resources[0] (WebApps.v1.apps.example.com): extra: unknown field "extra"` + " (known: group, version, resource, templates, statusTemplate, helpers, namespaces, selector, children, allowPermissionGrants, rollout, renderBudget, chart, overrideValues, tenantTemplates, kind, shortNames, categories, schema, reads, identity)\n" +
			cfg + `: resources[0] (WebApps.v1.apps.example.com): resource: "WebApps": resource must be the lowercase plural as in the CRD, e.g. webapps` + "\n" +
			cfg + `: resources[0] (WebApps.v1.apps.example.com): templates[1]: gone.tmpl: no such file (looked for ` + filepath.Join(dir, "gone.tmpl") + ")\n" +
			cfg + `: resources[1] (things.v1.apps.example.com): namespaces[0]: "Bad_NS" is not a valid namespace name`,
	})
	if n := strings.Count(r.stderr, "\n"); n != 4 {
		t.Errorf("want 4 error lines, got %d:\n%s", n, r.stderr)
	}

	// Template errors: all of them, with file and line.
	write(t, cfg, `resources:
  - {group: a.example.com, version: v1, resource: as, templates: [bad.tmpl]}
  - {group: b.example.com, version: v1, resource: bs, templates: [ok.tmpl], statusTemplate: bad.tmpl}
`)
	stencil(t, "", "validate", "--config", cfg).expect(t, 2, nil, []string{
		cfg + ": resources[0] (as.v1.a.example.com): templates[0]: template: bad.tmpl:1: unclosed action",
		cfg + ": resources[1] (bs.v1.b.example.com): statusTemplate: template: bad.tmpl:1: unclosed action",
	})
}

func TestRenderWebApp(t *testing.T) {
	r := stencil(t, "", "render", "--config", exampleConfig, "-f", webappSample)
	r.expect(t, 0, []string{
		"kind: Deployment", "kind: Service", "kind: ConfigMap", "kind: PodDisruptionBudget", "---\n",
		"stencil.dev/config-checksum:", "GREETING: hello", "minAvailable: 1",
		"ownerReferences:", "kind: WebApp", "controller: true", "blockOwnerDeletion: true",
		"app.kubernetes.io/managed-by: stencil", "stencil.dev/owner-uid:",
		"namespace: default", "replicas: 2", "image: registry.k8s.io/pause:3.10",
	}, nil)
	// Deployment, Service, ConfigMap and PodDisruptionBudget; no HPA
	// without spec.autoscale.
	if n := strings.Count(r.stdout, "ownerReferences:"); n != 4 {
		t.Errorf("want 4 children with ownerReferences, got %d", n)
	}
	golden(t, "render-webapp.golden.yaml", r.stdout)
}

func TestRenderSeveralDocumentsFromStdin(t *testing.T) {
	web := read(t, webappSample)
	cache := strings.Replace(read(t, cacheSample), "name: cache", "name: cache\n  namespace: team-a", 1)
	r := stencil(t, "---\n"+web+"---\n"+cache+"---\n", "render", "--config", exampleConfig, "-f", "-", "--namespace", "prod")
	r.expect(t, 0, []string{"kind: Memcached", "kind: WebApp", "namespace: prod", "namespace: team-a"}, nil)
	if n := strings.Count(r.stdout, "\n---\n"); n != 4 {
		t.Errorf("want 5 documents (4 children of the WebApp, 1 of the Memcached), got %d separators:\n%s", n, r.stdout)
	}
}

func TestRenderErrors(t *testing.T) {
	dir := t.TempDir()
	noImage := filepath.Join(dir, "noimage.yaml")
	write(t, noImage, "apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata:\n  name: demo\nspec:\n  replicas: 1\n")
	stencil(t, "", "render", "--config", exampleConfig, "-f", noImage).
		expect(t, 1, nil, []string{"WebApp default/demo", `webapp/deployment.yaml.tmpl:38: map has no entry for key "image"`})

	other := filepath.Join(dir, "other.yaml")
	write(t, other, "apiVersion: other.example.com/v1\nkind: Thing\nmetadata:\n  name: x\n")
	stencil(t, "", "render", "--config", exampleConfig, "-f", other).
		expect(t, 1, nil, []string{"lists no resource of other.example.com/v1"})

	stencil(t, "", "render", "--config", exampleConfig).expect(t, 2, nil, []string{"-f is required"})
	stencil(t, "", "render", "--config", exampleConfig, "-f", filepath.Join(dir, "gone.yaml")).expect(t, 1, nil, []string{"gone.yaml"})
	stencil(t, "", "render", "--config", "nope.yaml", "-f", webappSample).expect(t, 2, nil, []string{"nope.yaml"})
	stencil(t, "", "render", "--config", exampleConfig, "-f", "-").expect(t, 1, nil, []string{"no resources found"})
	stencil(t, read(t, webappSample)+"--- {kind: X}\n", "render", "--config", exampleConfig, "-f", "-").
		expect(t, 1, nil, []string{"-: splitting documents: invalid Yaml document separator: {kind: X}"})
	stencil(t, "kind: X\n", "render", "--config", exampleConfig, "-f", "-").expect(t, 1, nil, []string{"apiVersion and kind are required"})
}

// Two entries in one group/version: the kind does not say which, and stencil
// does not guess plurals, so --resource must pick.
func TestRenderAmbiguousResource(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "svc.tmpl"), "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Name }}-{{ .Resource.Resource }}\n")
	cfg := filepath.Join(dir, "stencil.yaml")
	write(t, cfg, `resources:
  - {group: apps.example.com, version: v1beta1, resource: webapps, templates: [svc.tmpl]}
  - {group: apps.example.com, version: v1beta1, resource: webjobs, templates: [svc.tmpl]}
`)
	stencil(t, "", "render", "--config", cfg, "-f", webappSample).
		expect(t, 1, nil, []string{"lists several resources in apps.example.com/v1beta1 (webapps, webjobs): pick one by its plural (render --resource, a test case's entry)"})
	stencil(t, "", "render", "--config", cfg, "-f", webappSample, "--resource", "webjobs").
		expect(t, 0, []string{"name: demo-webjobs"}, nil)
	stencil(t, "", "render", "--config", cfg, "-f", webappSample, "--resource", "webthings").
		expect(t, 1, nil, []string{`lists no resource "webthings" in apps.example.com/v1beta1 (it lists webapps, webjobs)`})
}

func TestRBAC(t *testing.T) {
	r := stencil(t, "", "rbac", "--config", exampleConfig)
	r.expect(t, 0, []string{"kind: ClusterRole", "name: stencil", "webapps/status"}, nil)
	want := read(t, filepath.Join("..", "..", "deploy", "base", "clusterrole.yaml")) + "---\n" +
		read(t, filepath.Join("..", "..", "deploy", "base", "role.yaml"))
	if r.stdout != want {
		t.Errorf("stencil rbac differs from deploy/base/clusterrole.yaml and deploy/base/role.yaml:\n%s", r.stdout)
	}
	stencil(t, "", "rbac", "--config", exampleConfig, "--name", "stencil-shard-a").
		expect(t, 0, []string{"name: stencil-shard-a"}, nil)
	stencil(t, "", "rbac", "--config", "nope.yaml").expect(t, 2, nil, []string{"nope.yaml"})
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		write(t, path, got)
	}
	if want := read(t, path); got != want {
		t.Errorf("%s differs (go test ./cmd/stencil -update if intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRenderObserved: without live children the AppStack's app template
// waits, and says for what; with them (--observed) it renders, reading the
// database Service's cluster IP, and the status template's wait is named.
func TestRenderObserved(t *testing.T) {
	sample := filepath.Join("..", "..", "crds", "samples", "appstack.yaml")
	r := stencil(t, "", "render", "--config", exampleConfig, "-f", sample)
	r.expect(t, 0, []string{"name: shop-db"}, []string{"waits: app waits for Deployment/shop-db, which does not exist"})
	if strings.Contains(r.stdout, "DB_HOST") {
		t.Errorf("the waiting app template rendered:\n%s", r.stdout)
	}
	observed := filepath.Join(t.TempDir(), "observed.yaml")
	if err := os.WriteFile(observed, []byte(`apiVersion: v1
kind: Service
metadata: {name: shop-db}
spec: {clusterIP: "10.96.0.42\n  injected: true", ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop-db, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1, conditions: [{type: Available, status: "True"}]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = stencil(t, "", "render", "--config", exampleConfig, "-f", sample, "--observed", observed)
	r.expect(t, 0, []string{"name: DB_HOST"}, []string{"waits: the status template reads a child that does not exist"})
	if strings.Contains(r.stderr, "app waits") {
		t.Errorf("the app template waits although its database is ready:\n%s", r.stderr)
	}
	// The hostile cluster IP lands as one value, whatever it holds.
	found := false
	for _, doc := range strings.Split(r.stdout, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name string }
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Env []map[string]any `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("output is not YAML: %v\n%s", err, doc)
		}
		if obj.Kind != "Deployment" || obj.Metadata.Name != "shop" {
			continue
		}
		env := obj.Spec.Template.Spec.Containers[0].Env
		found = len(env) == 2 && env[0]["value"] == "10.96.0.42\n  injected: true"
		if !found {
			t.Errorf("the app's env = %v, want DB_HOST holding the Service's cluster IP as it is", env)
		}
	}
	if !found {
		t.Errorf("no Deployment shop in the output:\n%s", r.stdout)
	}
}

// TestTestRunsStencilTest: stencil test runs the stencil-test binary
// (found on PATH here) with its arguments, and exits as it does.
func TestTestRunsStencilTest(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"stencil-test $*\"\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "stencil-test"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	stencil(t, "", "test", "--config", "x.yaml", "tests/a.yaml").expect(t, 3, []string{"stencil-test --config x.yaml tests/a.yaml"}, nil)
	t.Setenv("PATH", t.TempDir())
	stencil(t, "", "test").expect(t, 2, nil, []string{"stencil-test is neither next to stencil nor on PATH"})
}
