package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/install"
)

// TestArgoCDHealth runs the health script on one WebApp in each state the
// status contract allows, in a Lua interpreter set up as Argo CD sets up its
// own for a custom check.
func TestArgoCDHealth(t *testing.T) {
	const gen = "metadata: {name: demo, namespace: default, generation: 3}\n"
	cond := func(typ, status, reason, message string) string {
		return fmt.Sprintf("    - {type: %s, status: %q, reason: %s, message: %q, observedGeneration: 3}\n", typ, status, reason, message)
	}
	status := func(observed int, conditions ...string) string {
		return fmt.Sprintf("status:\n  observedGeneration: %d\n  phase: Whatever\n  conditions:\n%s", observed, strings.Join(conditions, ""))
	}
	renderMsg := `webapp/deployment.yaml.tmpl:32: map has no entry for key "image"`
	applyMsg := `applying Service/demo: Service "demo" is invalid: spec.ports[1].name: Duplicate value: "http"`
	conflictMsg := "Deployment/demo exists and is not controlled by WebApp demo"
	childMsg := "Deployment/demo: Progress deadline exceeded"
	pausedMsg := `stencil.dev/paused is "true": stencil makes no writes for this resource`

	for _, tc := range []struct {
		state, object, health, message string
	}{
		{"no status yet", gen, "Progressing", "Waiting for stencil's first status"},
		{"empty status", gen + "status: {}\n", "Progressing", "Waiting for stencil to observe generation 3"},
		{"Ready True, current", gen + status(3, cond("Ready", "True", "AllChildrenReady", "all children ready")),
			"Healthy", "all children ready"},
		{"Ready True, observedGeneration behind", gen + status(2, cond("Ready", "True", "AllChildrenReady", "all children ready")),
			"Progressing", "Waiting for stencil to observe generation 3"},
		{"Reconciling (Ready False Progressing)", gen + status(3,
			cond("Ready", "False", "Progressing", "Deployment/demo: 1 of 2 replicas available"),
			cond("Reconciling", "True", "Progressing", "Deployment/demo: 1 of 2 replicas available")),
			"Progressing", "Deployment/demo: 1 of 2 replicas available"},
		{"Ready False Progressing, no Reconciling (Ready alone)", gen + status(3,
			cond("Ready", "False", "Progressing", "Deployment/demo: 1 of 2 replicas available")),
			"Progressing", "Deployment/demo: 1 of 2 replicas available"},
		{"ApplyFailed, retrying (Reconciling)", gen + status(3,
			cond("Ready", "False", "ApplyFailed", "applying Deployment/demo: etcdserver: request timed out"),
			cond("Reconciling", "True", "ApplyFailed", "applying Deployment/demo: etcdserver: request timed out")),
			"Progressing", "applying Deployment/demo: etcdserver: request timed out"},
		// Pausing freezes observedGeneration: an edit made while paused
		// must not hide the pause.
		{"Paused", gen + status(2, cond("Ready", "False", "Paused", pausedMsg)), "Suspended", pausedMsg},
		{"Stalled RenderFailed", gen + status(3, cond("Ready", "False", "RenderFailed", renderMsg), cond("Stalled", "True", "RenderFailed", renderMsg)),
			"Degraded", renderMsg},
		{"Stalled ApplyFailed", gen + status(3, cond("Ready", "False", "ApplyFailed", applyMsg), cond("Stalled", "True", "ApplyFailed", applyMsg)),
			"Degraded", applyMsg},
		{"Stalled OwnershipConflict", gen + status(3, cond("Ready", "False", "OwnershipConflict", conflictMsg), cond("Stalled", "True", "OwnershipConflict", conflictMsg)),
			"Degraded", conflictMsg},
		{"Stalled without a message", gen + status(3, cond("Ready", "False", "RenderFailed", ""), cond("Stalled", "True", "RenderFailed", "")),
			"Degraded", "RenderFailed"},
		{"Stalled, observedGeneration behind", gen + status(2, cond("Ready", "False", "RenderFailed", renderMsg), cond("Stalled", "True", "RenderFailed", renderMsg)),
			"Progressing", "Waiting for stencil to observe generation 3"},
		{"Stalled ChildFailed", gen + status(3, cond("Ready", "False", "ChildFailed", childMsg), cond("Stalled", "True", "ChildFailed", childMsg)),
			"Degraded", childMsg},
		{"ChildFailed with Reconciling (older stencil)", gen + status(3, cond("Ready", "False", "ChildFailed", childMsg), cond("Reconciling", "True", "ChildFailed", childMsg)),
			"Degraded", childMsg},
		{"Ready False RenderFailed, no Stalled (Ready alone)", gen + status(3, cond("Ready", "False", "RenderFailed", renderMsg)),
			"Degraded", renderMsg},
		{"Ready False ApplyFailed, no Stalled (Ready alone)", gen + status(3, cond("Ready", "False", "ApplyFailed", applyMsg)),
			"Degraded", applyMsg},
		{"Ready False OwnershipConflict, no Stalled (Ready alone)", gen + status(3, cond("Ready", "False", "OwnershipConflict", conflictMsg)),
			"Degraded", conflictMsg},
	} {
		health, message := runHealthCheck(t, "apiVersion: apps.example.com/v1beta1\nkind: WebApp\n"+tc.object)
		if health != tc.health || message != tc.message {
			t.Errorf("%s: health %s (%q), want %s (%q)", tc.state, health, message, tc.health, tc.message)
		}
		t.Logf("%-57s -> %-11s %s", tc.state, health, message)
	}
}

// runHealthCheck runs install.HealthLua on the object in objYAML the way Argo CD
// does: the object comes from the API server (numbers are int64) as the
// global obj, only the base, table and package libraries are open, and the
// script's return value is the health.
func runHealthCheck(t *testing.T, objYAML string) (health, message string) {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(objYAML))
	if err != nil {
		t.Fatal(err)
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}

	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, u.Object))
	if err := L.DoString(install.HealthLua); err != nil {
		t.Fatalf("health script: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health script returned %s, want a table", L.Get(-1).Type())
	}
	health, message = luaString(t, hs, "status"), luaString(t, hs, "message")
	switch health {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
	default:
		t.Fatalf("health script returned status %q, which Argo CD reads as Unknown", health)
	}
	return health, message
}

func luaString(t *testing.T, tbl *lua.LTable, key string) string {
	t.Helper()
	switch v := tbl.RawGetString(key).(type) {
	case lua.LString:
		return string(v)
	case *lua.LNilType:
		return ""
	default:
		t.Fatalf("hs.%s is a %s, want a string", key, v.Type())
		return ""
	}
}

// toLua converts an unstructured value to Lua as Argo CD does: maps become
// tables keyed by string, lists become sequences, numbers become numbers.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		tbl := L.CreateTable(0, len(v))
		for k, e := range v {
			tbl.RawSetString(k, toLua(L, e))
		}
		return tbl
	case []any:
		tbl := L.CreateTable(len(v), 0)
		for _, e := range v {
			tbl.Append(toLua(L, e))
		}
		return tbl
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

func TestArgoCD(t *testing.T) {
	r := stencil(t, "", "argocd", "--config", exampleConfig)
	r.expect(t, 0, []string{"resource.customizations.health.apps.example.com_WebApp: |\n  -- Generated by"}, nil)
	// Pasteable: the output is argocd-cm data whose values are the script.
	var data map[string]string
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &data); err != nil {
		t.Fatalf("output is not a YAML map of strings: %v\n%s", err, r.stdout)
	}
	want := []string{
		"resource.customizations.health.apps.example.com_WebApp",
		"resource.customizations.health.cache.example.com_Memcached",
		"resource.customizations.health.stacks.example.com_AppStack",
		"resource.customizations.health.charts.example.com_Hello",
	}
	if len(data) != len(want) {
		t.Errorf("got %d entries, want %d:\n%s", len(data), len(want), r.stdout)
	}
	for _, k := range want {
		if data[k] != install.HealthLua {
			t.Errorf("%s is not the health script:\n%s", k, data[k])
		}
	}

	// A config beside its templates only (the example's, copied without
	// the CRDs): the CRDs must be named.
	deployConfig := configWithoutCRDs(t)
	stencil(t, "", "argocd", "--config", deployConfig).expect(t, 1, nil, []string{
		deployConfig + ": resources[0] (webapps.v1beta1.apps.example.com): no CustomResourceDefinition for webapps.apps.example.com in " +
			filepath.Dir(deployConfig) + " (name the CRDs with --crds)\n",
		"resources[1] (memcacheds.v1alpha1.cache.example.com): no CustomResourceDefinition for memcacheds.cache.example.com",
		"resources[2] (appstacks.v1alpha1.stacks.example.com): no CustomResourceDefinition for appstacks.stacks.example.com",
		"resources[3] (hellos.v1.charts.example.com): no CustomResourceDefinition for hellos.charts.example.com",
	})
	stencil(t, "", "argocd", "--config", deployConfig, "--crds", filepath.Dir(exampleConfig)).expect(t, 0, []string{r.stdout}, nil)
	stencil(t, "", "argocd", "--config", deployConfig, "--crds", filepath.Join("..", "..", "crds", "webapp-crd.yaml")).
		expect(t, 1, nil, []string{"no CustomResourceDefinition for memcacheds.cache.example.com"})
	stencil(t, "", "argocd", "--config", "nope.yaml").expect(t, 2, nil, []string{"nope.yaml"})
}

// configWithoutCRDs copies crds/stencil.yaml and its templates, not the
// CRDs beside them, to a new directory and returns the config's path.
func configWithoutCRDs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, rel := range []string{"stencil.yaml", "webapp", "memcached", "appstack", "charts"} {
		src := filepath.Join("..", "..", "crds", rel)
		err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			name, err := filepath.Rel(filepath.Join("..", "..", "crds"), path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name), data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "stencil.yaml")
}

func TestArgoCDCRDErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "svc.tmpl"), "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Name }}\n")
	cfg := filepath.Join(dir, "stencil.yaml")
	write(t, cfg, "resources:\n  - {group: apps.example.com, version: v1beta1, resource: webapps, templates: [svc.tmpl]}\n")
	crd := func(kind string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: webapps.apps.example.com}\n" +
			"spec: {group: apps.example.com, names: {plural: webapps, kind: " + kind + "}}\n"
	}

	write(t, filepath.Join(dir, "a.yaml"), crd("WebApp"))
	write(t, filepath.Join(dir, "b.yml"), "# not a CRD\n---\n"+crd("Webapp"))
	stencil(t, "", "argocd", "--config", cfg).expect(t, 1, nil, []string{
		filepath.Join(dir, "b.yml") + `: CustomResourceDefinition "webapps.apps.example.com" names webapps.apps.example.com kind Webapp, ` +
			filepath.Join(dir, "a.yaml") + " names it WebApp",
	})

	write(t, filepath.Join(dir, "b.yml"), "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {group: apps.example.com, names: {plural: xs}}\n")
	stencil(t, "", "argocd", "--config", cfg).expect(t, 1, nil, []string{`b.yml: CustomResourceDefinition "x": spec.names.kind is required`})

	write(t, filepath.Join(dir, "b.yml"), "a: [")
	stencil(t, "", "argocd", "--config", cfg).expect(t, 1, nil, []string{"b.yml: document 1:"})

	// Templates and other files are not read; one file may be named alone.
	write(t, filepath.Join(dir, "b.yml"), "")
	stencil(t, "", "argocd", "--config", cfg).expect(t, 0, []string{"resource.customizations.health.apps.example.com_WebApp: |\n"}, nil)
	stencil(t, "", "argocd", "--config", cfg, "--crds", filepath.Join(dir, "a.yaml")).expect(t, 0, []string{"_WebApp: |\n"}, nil)
	stencil(t, "", "argocd", "--config", cfg, "--crds", filepath.Join(dir, "gone")).expect(t, 1, nil, []string{"reading CRDs:", "gone"})
}

func TestHealthKey(t *testing.T) {
	for gk, want := range map[schema.GroupKind]string{
		{Group: "apps.example.com", Kind: "WebApp"}: "resource.customizations.health.apps.example.com_WebApp",
		{Kind: "ConfigMap"}:                         "resource.customizations.health.ConfigMap",
	} {
		if got := install.ArgoCDHealthKey(gk); got != want {
			t.Errorf("ArgoCDHealthKey(%v) = %q, want %q", gk, got, want)
		}
	}
}
