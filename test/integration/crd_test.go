//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/templates"
)

var (
	crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gadgets = schema.GroupVersionResource{Group: "gen.stencil.dev", Version: "v1", Resource: "gadgets"}
)

// gadgetConfig is a team's own config: a Gadget kind whose API the
// config declares; extra adds spec fields, version names the version.
func gadgetConfig(version, extra string) string {
	return `resources:
  - group: gen.stencil.dev
    version: ` + version + `
    resource: gadgets
    kind: Gadget
    shortNames: [gd]
    schema:
      spec:
        image: string | required=true minLength=1
        replicas: integer | default=1 minimum=0 maximum=5
        tier: string | enum="web,batch" default="web"` + extra + `
      validation:
        - rule: "self.replicas <= 3 || self.image.startsWith('registry.internal/')"
          message: more than 3 replicas need an image from registry.internal
      printerColumns:
        - {name: Image, jsonPath: .spec.image, type: string}
    templates: [deployment.yaml.tmpl]
`
}

const gadgetDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name | quote }}
spec:
  replicas: {{ get .Spec "replicas" 1 | int64 }}
  selector:
    matchLabels: {app: {{ .Name | quote }}}
  template:
    metadata:
      labels: {app: {{ .Name | quote }}}
    spec:
      containers:
        - name: main
          image: {{ .Spec.image | quote }}
`

// writeConfig writes a config and its template into dir; it returns the
// config's path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "deployment.yaml.tmpl"), []byte(gadgetDeployment), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl runs the plane's kubectl with stdin; it returns the exit status
// and what it printed.
func kubectl(t *testing.T, stdin string, args ...string) (int, string) {
	t.Helper()
	return runTool(t, "kubectl", stdin, args...)
}

// runTool runs bin/NAME with stdin; it returns the exit status and what
// it printed.
func runTool(t *testing.T, name, stdin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "bin", name), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// gadget is a Gadget manifest.
func gadget(ns, name, spec string) string {
	return fmt.Sprintf("apiVersion: gen.stencil.dev/v1\nkind: Gadget\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, ns, spec)
}

// readyTrue reports whether u's Ready condition is True.
func readyTrue(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// TestManagedCRD: a team's config declares a Gadget's API. run
// --manage-crds creates the CRD; a valid Gadget becomes Ready; a wrong
// type, a value out of range, a missing required field, an unknown field
// and a CEL violation are each refused by kubectl apply with the field
// path, and none of them reaches stencil (never stored, no write of
// stencil's names them). A reload that adds an optional field updates the
// CRD, and a Gadget using it becomes Ready; a reload the API server
// refuses (the version changed under stored objects) leaves the CRD and
// the running config as they were. A restart of the converged Gadgets, CRD
// managed, and a resync after it write nothing.
func TestManagedCRD(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("it-crd-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	_ = admin.Resource(crdsGVR).Delete(ctx, "gadgets.gen.stencil.dev", metav1.DeleteOptions{})
	poll(t, time.Minute, "no Gadget CRD left from an earlier run", func() (bool, error) {
		_, err := admin.Resource(crdsGVR).Get(ctx, "gadgets.gen.stencil.dev", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	t.Cleanup(func() {
		_ = admin.Resource(crdsGVR).Delete(context.Background(), "gadgets.gen.stencil.dev", metav1.DeleteOptions{})
	})

	dir := t.TempDir()
	path := writeConfig(t, dir, gadgetConfig("v1", ""))
	cnt := &counter{mutating: map[string]int{}}
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.ManageCRDs = true })
	poll(t, time.Minute, "the Gadget CRD, established", func() (bool, error) {
		_, err := admin.Resource(gadgets).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	if status, out := kubectl(t, gadget(ns, "ok", "  image: registry.k8s.io/pause:3.10\n  replicas: 2\n"), "apply", "-f", "-"); status != 0 {
		t.Fatalf("kubectl apply of a valid Gadget: exit %d: %s", status, out)
	}
	poll(t, 2*time.Minute, "Gadget ok Ready", func() (bool, error) {
		u, err := admin.Resource(gadgets).Namespace(ns).Get(ctx, "ok", metav1.GetOptions{})
		return err == nil && readyTrue(u), nil
	})

	for _, c := range []struct{ name, spec, want string }{
		{"bad-type", "  image: x\n  replicas: three\n", "spec.replicas"},
		{"bad-range", "  image: x\n  replicas: 9\n", "spec.replicas"},
		{"bad-required", "  replicas: 1\n", "spec.image"},
		{"bad-unknown", "  image: x\n  colour: red\n", "spec.colour"},
		{"bad-cel", "  image: docker.io/x\n  replicas: 4\n", "more than 3 replicas need an image from registry.internal"},
		{"bad-enum", "  image: x\n  tier: gpu\n", "spec.tier"},
	} {
		status, out := kubectl(t, gadget(ns, c.name, c.spec), "apply", "-f", "-")
		if status == 0 || !strings.Contains(out, c.want) {
			t.Errorf("kubectl apply of %s: exit %d, want a refusal naming %q; printed: %s", c.name, status, c.want, out)
		} else {
			t.Logf("%s refused: %s", c.name, strings.ReplaceAll(strings.TrimSpace(out), "\n", " "))
		}
		if _, err := admin.Resource(gadgets).Namespace(ns).Get(ctx, c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s was stored: %v", c.name, err)
		}
		cnt.mu.Lock()
		writes := cnt.byObject["gadgets/"+c.name] + cnt.byObject["deployments/"+c.name]
		cnt.mu.Unlock()
		if writes != 0 {
			t.Errorf("stencil wrote %d times for %s", writes, c.name)
		}
	}

	// A reload that adds an optional field, planned first: stencil diff
	// --manage-crds shows the CRD's change.
	next := writeConfig(t, dir, gadgetConfig("v1", "\n        size: string | maxLength=10"))
	if status, out := runDiff(t, next, ns, "--manage-crds", "-o", "json"); status != 1 || !strings.Contains(out, `"kind": "CustomResourceDefinition"`) ||
		!strings.Contains(out, "properties.spec.properties.size") {
		t.Errorf("stencil diff of the config adding spec.size: exit %d, want 1 and the CRD's update naming spec.size:\n%s", status, out)
	}
	if err := reload(ctx, t, r, next); err != nil {
		t.Fatalf("reload adding spec.size: %v", err)
	}
	poll(t, time.Minute, "the CRD with spec.size", func() (bool, error) {
		u, err := admin.Resource(crdsGVR).Get(ctx, "gadgets.gen.stencil.dev", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		_, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "size")
		return ok, nil
	})
	if status, out := kubectl(t, gadget(ns, "sized", "  image: registry.k8s.io/pause:3.10\n  size: small\n"), "apply", "-f", "-"); status != 0 {
		t.Fatalf("kubectl apply of a Gadget with spec.size: exit %d: %s", status, out)
	}
	poll(t, 2*time.Minute, "Gadget sized Ready", func() (bool, error) {
		u, err := admin.Resource(gadgets).Namespace(ns).Get(ctx, "sized", metav1.GetOptions{})
		return err == nil && readyTrue(u), nil
	})

	// A reload the API server refuses: v2 alone, while Gadgets are stored as v1.
	before, err := admin.Resource(crdsGVR).Get(ctx, "gadgets.gen.stencil.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := filepath.Join(t.TempDir(), "stencil.yaml")
	refused = writeConfig(t, filepath.Dir(refused), gadgetConfig("v2", "\n        size: string | maxLength=10"))
	err = reload(ctx, t, r, refused)
	if err == nil {
		t.Fatal("a reload whose CRD the API server refuses was taken")
	}
	t.Logf("refused reload: %v", err)
	after, err := admin.Resource(crdsGVR).Get(ctx, "gadgets.gen.stencil.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Error("the refused reload changed the CRD")
	}
	if status, out := kubectl(t, gadget(ns, "ok", "  image: registry.k8s.io/pause:3.10\n  replicas: 3\n"), "apply", "-f", "-"); status != 0 {
		t.Fatalf("kubectl apply after the refused reload: exit %d: %s", status, out)
	}
	poll(t, time.Minute, "the running config to scale ok's Deployment to 3", func() (bool, error) {
		u, err := admin.Resource(deployments).Namespace(ns).Get(ctx, "ok", metav1.GetOptions{})
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return err == nil && n == 3, nil
	})
	// Converged before the restart: both Gadgets' statuses say every pod
	// of their current generation is ready, so a restart has nothing to
	// report.
	for _, g := range []struct {
		name     string
		replicas int64
	}{{"ok", 3}, {"sized", 1}} {
		poll(t, 2*time.Minute, "Gadget "+g.name+" converged", func() (bool, error) {
			u, err := admin.Resource(gadgets).Namespace(ns).Get(ctx, g.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			seen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			return readyTrue(u) && seen == u.GetGeneration() && ready == g.replicas, nil
		})
	}
	r.settle(t, 0, 2)
	r.stop(t)

	// A restart, CRD managed, of converged Gadgets: no write.
	restart := &counter{mutating: map[string]int{}}
	r = startWith(t, cfg, restart, ns, next, func(o *controller.Options) { o.ManageCRDs = true })
	r.settle(t, 0, 2)
	restart.mu.Lock()
	restarted := len(restart.mutating)
	restart.mu.Unlock()
	// And a forced resync of the converged Gadgets: no write either.
	reconciled := r.counterValue(t, "stencil_reconcile_total")
	if n := r.c.EnqueueAll(); n != 2 {
		t.Errorf("resync enqueued %d Gadgets, want 2", n)
	}
	r.settle(t, reconciled, 2)
	r.stop(t)
	restart.mu.Lock()
	if restarted != 0 || len(restart.mutating) != 0 {
		t.Errorf("a restart with a managed CRD, then a resync, wrote: %v", restart.mutating)
	}
	restart.mu.Unlock()
	t.Logf("restart and resync: %d reads, 0 writes", restart.reads.Load())
	handEditedCRD(ctx, t, cfg, ns, next)
}

// handEditedCRD: someone edits the managed CRD by hand (a shortName
// added; its applied-hash annotation unchanged). stencil diff
// --manage-crds lists the CRD's update on that field, diff without the
// flag does not; run --manage-crds puts the CRD back, as the plan said;
// then the plan is empty.
func handEditedCRD(ctx context.Context, t *testing.T, cfg *rest.Config, ns, path string) {
	admin := dynamic.NewForConfigOrDie(cfg)
	crds := admin.Resource(crdsGVR)
	shortNames := func() []string {
		u, err := crds.Get(ctx, "gadgets.gen.stencil.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "names", "shortNames")
		return names
	}
	if _, err := crds.Patch(ctx, "gadgets.gen.stencil.dev", types.MergePatchType, []byte(`{"spec":{"names":{"shortNames":["gd","gx"]}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	status, out := runDiff(t, path, ns, "--manage-crds", "-o", "json")
	if status != 1 || !strings.Contains(out, `"kind": "CustomResourceDefinition"`) || !strings.Contains(out, "spec.names.shortNames") {
		t.Errorf("diff --manage-crds of a hand-edited CRD: exit %d, want 1 and the CRD's update on spec.names.shortNames:\n%s", status, out)
	}
	if _, out := runDiff(t, path, ns, "-o", "json"); strings.Contains(out, "CustomResourceDefinition") {
		t.Errorf("diff without --manage-crds lists the CRD:\n%s", out)
	}
	cnt := &counter{mutating: map[string]int{}}
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.ManageCRDs = true })
	poll(t, time.Minute, "run --manage-crds to put the CRD back", func() (bool, error) {
		return reflect.DeepEqual(shortNames(), []string{"gd"}), nil
	})
	r.settle(t, 0, 2)
	r.stop(t)
	if status, out := runDiff(t, path, ns, "--manage-crds", "-o", "json"); status != 0 || strings.Contains(out, "CustomResourceDefinition") {
		t.Errorf("diff --manage-crds after run put the CRD back: exit %d, want 0 and no CRD:\n%s", status, out)
	}
	t.Logf("hand-edited CRD: planned, put back by run --manage-crds (writes %v), then planned as unchanged", cnt.mutating)
}

// reload loads the config at path and hands it to the running controller.
func reload(ctx context.Context, t *testing.T, r *running, path string) error {
	t.Helper()
	conf, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := templates.LoadAll(conf, templates.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r.c.Reconfigure(ctx, conf, sets)
}

// nginxConfig is a chart entry whose API is derived from bitnami nginx's
// values.schema.json (and values.yaml), narrowed to what tenants may set.
const nginxConfig = `resources:
  - group: web.stencil.dev
    version: v1
    resource: nginxes
    kind: Nginx
    chart: CHART
    schema: {fromChart: true, expose: [image.tag, replicaCount, service.type]}
`

// TestGeneratedCRDsPassTheServer: stencil crd's output for the example
// config (the WebApp's SimpleSchema, the hello chart's values.schema.json),
// for a team's config (SimpleSchema, CEL, printer columns) and for bitnami
// nginx's chart with expose passes kubectl apply --dry-run=server. Installed, the
// Nginx CRD accepts the exposed values and refuses podSecurityContext,
// which the chart turns into structure, at kubectl apply.
func TestGeneratedCRDsPassTheServer(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	gadgetPath := writeConfig(t, t.TempDir(), gadgetConfig("v1", ""))
	nginxPath := filepath.Join(t.TempDir(), "stencil.yaml")
	chart, err := filepath.Abs(filepath.Join(root, "templates", "chart", "testdata", "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nginxPath, []byte(strings.Replace(nginxConfig, "CHART", chart, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	crds := map[string]string{}
	example := filepath.Join(root, "crds", "stencil.yaml")
	for _, path := range []string{example, gadgetPath, nginxPath} {
		cmd := exec.Command(filepath.Join(root, "bin", "stencil"), "crd", "--config", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || len(bytes.TrimSpace(out)) == 0 {
			t.Fatalf("stencil crd --config %s: %v, %d bytes: %s", path, err, len(out), stderr.String())
		}
		crds[path] = string(out)
		if status, msg := kubectl(t, string(out), "apply", "--dry-run=server", "-f", "-"); status != 0 {
			t.Errorf("kubectl apply --dry-run=server of stencil crd --config %s: exit %d: %s", path, status, msg)
		} else {
			t.Logf("%s", strings.TrimSpace(msg))
		}
	}

	t.Cleanup(func() {
		_ = admin.Resource(crdsGVR).Delete(context.Background(), "nginxes.web.stencil.dev", metav1.DeleteOptions{})
	})
	if status, msg := kubectl(t, crds[nginxPath], "apply", "--server-side", "-f", "-"); status != 0 {
		t.Fatalf("installing the Nginx CRD: exit %d: %s", status, msg)
	}
	ns := fmt.Sprintf("it-nginx-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	nginx := func(spec string) string {
		return fmt.Sprintf("apiVersion: web.stencil.dev/v1\nkind: Nginx\nmetadata: {name: web, namespace: %s}\nspec:\n%s", ns, spec)
	}
	poll(t, time.Minute, "the Nginx CRD, established", func() (bool, error) {
		status, _ := kubectl(t, nginx("  replicaCount: 2\n"), "apply", "--dry-run=server", "-f", "-")
		return status == 0, nil
	})
	if status, msg := kubectl(t, nginx("  replicaCount: 2\n  image: {tag: 1.29.2}\n  service: {type: ClusterIP}\n"), "apply", "--dry-run=server", "-f", "-"); status != 0 {
		t.Errorf("an Nginx setting the exposed values: exit %d: %s", status, msg)
	}
	status, msg := kubectl(t, nginx("  podSecurityContext: {enabled: true, fsGroup: 0}\n"), "apply", "--dry-run=server", "-f", "-")
	if status == 0 || !strings.Contains(msg, "spec.podSecurityContext") {
		t.Errorf("an Nginx setting podSecurityContext: exit %d, want a refusal naming spec.podSecurityContext: %s", status, msg)
	} else {
		t.Logf("podSecurityContext refused: %s", strings.TrimSpace(msg))
	}
}

// TestManifestsPassTheServer: stencil manifests' output, for the example
// config and for a config serving bitnami nginx (a chart with a subchart),
// passes kubectl apply --dry-run=server, in a namespace of the test's.
func TestManifestsPassTheServer(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	ns := fmt.Sprintf("it-manifests-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	chart, err := filepath.Abs(filepath.Join(root, "templates", "chart", "testdata", "charts", "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	// A chart is mounted from under its config's directory: copy it there.
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", chart, filepath.Join(dir, "nginx")).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v: %s", err, out)
	}
	nginxPath := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(nginxPath, []byte(strings.Replace(nginxConfig, "CHART", "nginx", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ config, want string }{
		{filepath.Join(root, "crds", "stencil.yaml"), "deployment.apps/stencil created (server dry run)"},
		{nginxPath, "customresourcedefinition.apiextensions.k8s.io/nginxes.web.stencil.dev created (server dry run)"},
	} {
		cmd := exec.Command(filepath.Join(root, "bin", "stencil"), "manifests", "--config", c.config, "--namespace", ns, "--manage-crds")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("stencil manifests --config %s: %v: %s", c.config, err, stderr.String())
		}
		// The Namespace exists already (the test's): the rest is checked.
		status, msg := kubectl(t, string(out), "apply", "--dry-run=server", "-f", "-")
		if status != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("kubectl apply --dry-run=server of stencil manifests --config %s: exit %d, want %q:\n%s", c.config, status, c.want, msg)
			continue
		}
		t.Logf("%s: %d objects accepted", c.config, strings.Count(msg, "(server dry run)"))
	}
}

// TestValidateServer: the checks config/crd leaves to the API server. A
// CEL rule that does not parse, and one that names a field the schema
// lacks, pass stencil validate offline (it links none of the API server's
// CEL packages) and are refused by validate --server, naming the CRD and
// the rule; the team's valid config passes it.
func TestValidateServer(t *testing.T) {
	kubeconfig := os.Getenv("KUBECONFIG")
	validate := func(path string, args ...string) (int, string) {
		return runTool(t, "stencil", "", append([]string{"validate", "--config", path}, args...)...)
	}
	good := writeConfig(t, t.TempDir(), gadgetConfig("v1", ""))
	if status, out := validate(good, "--server", "--kubeconfig", kubeconfig); status != 0 || !strings.Contains(out, "accepts 1 generated CRD") {
		t.Errorf("validate --server of a valid config: exit %d: %s", status, out)
	}
	for _, c := range []struct{ name, rule, want string }{
		{"does not parse", "self.replicas >", "Syntax error"},
		{"names an unknown field", "self.nosuch > 1", "nosuch"},
	} {
		path := writeConfig(t, t.TempDir(), strings.Replace(gadgetConfig("v1", ""),
			`"self.replicas <= 3 || self.image.startsWith('registry.internal/')"`, strconv.Quote(c.rule), 1))
		if status, out := validate(path); status != 0 {
			t.Errorf("%s: offline validate: exit %d: %s", c.name, status, out)
		}
		status, out := validate(path, "--server", "--kubeconfig", kubeconfig)
		if status == 0 || !strings.Contains(out, "gadgets.gen.stencil.dev") || !strings.Contains(out, c.want) {
			t.Errorf("%s: validate --server: exit %d, want a refusal naming the CRD and %q: %s", c.name, status, c.want, out)
		} else {
			t.Logf("%s: %s", c.name, strings.TrimSpace(out))
		}
	}
}

// TestValidateServerIdentity: validate --server asks whether stencil's
// account may impersonate each identity the config names. An account
// bound to impersonate the tenant's builder but not the platform's
// writer is refused, naming the entry, the identity and the missing
// verbs; once it may impersonate both, validate passes.
func TestValidateServerIdentity(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	kubeconfig := os.Getenv("KUBECONFIG")
	ns := fmt.Sprintf("it-validate-%d", time.Now().UnixNano()%100000)
	config := gadgetConfig("v1", "") + `    identity: {tenant: builder}
  - group: gen.stencil.dev
    version: v1
    resource: widgets
    kind: Widget
    schema:
      spec:
        image: string | required=true minLength=1
    templates: [deployment.yaml.tmpl]
    identity: {serviceAccount: writer, namespace: platform}
`
	path := writeConfig(t, t.TempDir(), config)
	role := func(names ...string) {
		t.Helper()
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: names, Verbs: []string{"get", "impersonate"}}}}
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = kube.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	role("builder")
	t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "stencil"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	validate := func() (int, string) {
		return runTool(t, "stencil", "", "validate", "--config", path, "--server", "--kubeconfig", kubeconfig, "--controller-account", ns+"/stencil")
	}
	status, out := validate()
	want := "identity serviceAccount platform/writer: system:serviceaccount:" + ns + ":stencil may not get or impersonate ServiceAccount writer in namespace platform"
	if status != 2 || !strings.Contains(out, want) || strings.Contains(out, "ServiceAccount builder") {
		t.Fatalf("validate --server with writer not impersonable: exit %d, want 2 and %q, and nothing of builder:\n%s", status, want, out)
	}
	t.Logf("refused:\n%s", out)
	role("builder", "writer")
	poll(t, 30*time.Second, "validate --server to pass once stencil may impersonate writer", func() (bool, error) {
		status, out = validate()
		return status == 0 && strings.Contains(out, "may impersonate every identity the config names"), nil
	})
	t.Logf("passes: %s", strings.TrimSpace(out))
}
