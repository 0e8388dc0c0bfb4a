//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// diffJSON is "stencil diff -o json" (docs/operating.md, "A plan before a template change").
type diffJSON struct {
	Children []struct {
		Parent struct {
			Resource, Namespace, Name string
		} `json:"parent"`
		Kind   string   `json:"kind"`
		Name   string   `json:"name"`
		Action string   `json:"action"`
		Fields []string `json:"fields"`
	} `json:"children"`
	Summary struct {
		Create, Update, Prune, Unchanged, RenderFailed int
		Paused                                         int `json:"paused"`
	} `json:"summary"`
}

// runDiff runs bin/stencil diff and returns its exit status and output.
func runDiff(t testing.TB, config, ns string, args ...string) (int, string) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(root, "bin", "stencil"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: run make build first", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"diff", "--config", config, "--namespace", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
	case err != nil:
		t.Fatal(err)
	}
	shown := stdout.String()
	if len(shown) > 2000 {
		shown = shown[:2000] + fmt.Sprintf("... (%d bytes in all)\n", stdout.Len())
	}
	t.Logf("%s: exit %d\n%s%s", strings.Join(cmd.Args[1:], " "), cmd.ProcessState.ExitCode(), shown, stderr.String())
	return cmd.ProcessState.ExitCode(), stdout.String()
}

// copyConfig copies crds/stencil.yaml and its templates to a new directory,
// with edit applied to the file rel (relative to crds/), and returns the
// config.
func copyConfig(t testing.TB, rel string, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(root, "crds")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if name == filepath.FromSlash(rel) {
			edited := edit(string(data))
			if edited == string(data) {
				t.Fatalf("the edit changes nothing in crds/%s", rel)
			}
			data = []byte(edited)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "stencil.yaml")
}

// resourceVersions records the resourceVersion of every object of the
// resources in ns, and of the namespace's events.
func resourceVersions(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, res := range []schema.GroupVersionResource{
		webapps, deployments, services,
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "events"},
	} {
		list, err := dyn.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			out[res.Resource+"/"+u.GetName()] = u.GetResourceVersion()
		}
	}
	return out
}

// TestDiff: three converged WebApps; a config whose template changes the
// image tag shows three Deployment updates on the image path and exits 1;
// the running config exits 0; neither diff writes anything.
func TestDiff(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-diff-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)

	cnt := &counter{mutating: map[string]int{}}
	r := start(t, cfg, cnt, ns)
	const n = 3
	for i := range n {
		spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1), "port": int64(8080)}
		if _, err := createOnce(ctx, admin.Resource(webapps).Namespace(ns), cr(webapps, "WebApp", ns, fmt.Sprintf("web-%d", i), spec)); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 3*time.Minute, "3 WebApps Ready=True", func() (bool, error) {
		list, err := admin.Resource(webapps).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if isReady(&list.Items[i]) {
				ready++
			}
		}
		return ready == n, nil
	})
	r.settle(t, 0, n)
	// The diff is measured alone: nothing else of stencil's may write.
	r.stop(t)
	before := resourceVersions(ctx, t, admin, ns)

	const image = `{{ required "spec.image must not be empty" .Spec.image | quote }}`
	changed := copyConfig(t, "webapp/deployment.yaml.tmpl", func(tmpl string) string {
		return strings.Replace(tmpl, image, `"registry.k8s.io/pause:3.9"`, 1)
	})

	status, out := runDiff(t, changed, ns, "-o", "json")
	if status != 1 {
		t.Errorf("diff of an image change: exit %d, want 1", status)
	}
	var got diffJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	updated := 0
	for _, c := range got.Children {
		if c.Action != "update" || c.Kind != "Deployment" {
			t.Errorf("unexpected child in the diff: %+v", c)
			continue
		}
		updated++
		if want := []string{"spec.template.spec.containers[name=web].image"}; !reflect.DeepEqual(c.Fields, want) {
			t.Errorf("Deployment %s: fields %q, want %q", c.Name, c.Fields, want)
		}
		if c.Parent.Resource != "webapps" || c.Parent.Namespace != ns || c.Parent.Name != c.Name {
			t.Errorf("Deployment %s: parent %+v", c.Name, c.Parent)
		}
	}
	if updated != n || got.Summary.Update != n || got.Summary.Create != 0 || got.Summary.Prune != 0 || got.Summary.Unchanged != n {
		t.Errorf("summary %+v with %d Deployment updates; want %d updates, 0 creates, 0 prunes, %d unchanged (the Services)", got.Summary, updated, n, n)
	}

	status, out = runDiff(t, changed, ns)
	if status != 1 || !strings.Contains(out, "~ update 3 Deployments: spec.template.spec.containers[name=web].image registry.k8s.io/pause:3.10 -> registry.k8s.io/pause:3.9 (pods roll)\n") ||
		!strings.Contains(out, "0 to create, 3 to update, 0 to prune, 3 unchanged, 0 render failures\n") {
		t.Errorf("text diff of an image change: exit %d, want 1 and the grouped image line and summary", status)
	}

	status, out = runDiff(t, filepath.Join(root, "crds", "stencil.yaml"), ns, "-o", "json")
	if status != 0 {
		t.Errorf("diff of the running config: exit %d, want 0", status)
	}
	got = diffJSON{}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if len(got.Children) != 0 || got.Summary.Unchanged != 2*n {
		t.Errorf("diff of the running config: %d children, summary %+v; want none, %d unchanged", len(got.Children), got.Summary, 2*n)
	}

	// A template dropped, a render that fails, a status field changed.
	for _, tc := range []struct {
		name, file, from, to string
		line, summary        string
	}{{
		name: "service template dropped", file: "stencil.yaml", from: "      - webapp/service.yaml.tmpl\n", to: "",
		line:    "- prune 3 Services\n",
		summary: "0 to create, 0 to update, 3 to prune, 3 unchanged, 0 render failures\n",
	}, {
		name: "render fails", file: "webapp/deployment.yaml.tmpl", from: image, to: `{{ required "spec.missing is required" .Spec.missing | quote }}`,
		line:    ns + "/web-1: RenderFailed: ",
		summary: "0 to create, 0 to update, 0 to prune, 0 unchanged, 3 render failures\n",
	}, {
		name: "status template changed", file: "webapp/status.yaml.tmpl", from: `"http://%s.%s.svc:%d"`, to: `"https://%s.%s.svc:%d"`,
		line:    "~ update 1 WebApp: status.url http://web-0." + ns + ".svc:8080 -> https://web-0.",
		summary: "0 to create, 3 to update, 0 to prune, 6 unchanged, 0 render failures\n",
	}} {
		config := copyConfig(t, tc.file, func(s string) string { return strings.Replace(s, tc.from, tc.to, 1) })
		status, out := runDiff(t, config, ns)
		if status != 1 || !strings.Contains(out, tc.line) || !strings.HasSuffix(out, tc.summary) {
			t.Errorf("%s: exit %d, want 1, a line with %q and the summary %q", tc.name, status, tc.line, tc.summary)
		}
	}

	after := resourceVersions(ctx, t, admin, ns)
	if !reflect.DeepEqual(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("%s changed during the diffs: resourceVersion %s -> %s", k, before[k], v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s was deleted during the diffs", k)
			}
		}
	}
}

// editConfig copies crds/stencil.yaml and its templates to a new directory
// with each edit applied to its file (relative to crds/): every edit must
// change its file.
func editConfig(t testing.TB, edits map[string]func(string) string) string {
	t.Helper()
	var config string
	for rel, edit := range edits {
		if config == "" {
			config = copyConfig(t, rel, edit)
			continue
		}
		path := filepath.Join(filepath.Dir(config), filepath.FromSlash(rel))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := edit(string(data))
		if edited == string(data) {
			t.Fatalf("the edit changes nothing in crds/%s", rel)
		}
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return config
}

// readyReason returns the reason of u's Ready condition.
func readyReason(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			reason, _ := m["reason"].(string)
			return reason
		}
	}
	return ""
}

// TestDiffAgreesWithTheController: a config change meeting one case of
// every decision Sync makes, planned by stencil diff, then carried out by
// the controller with the same config. The config adds a label to every
// WebApp's Service, and a rollout (maxInFlight 1) to the Memcached entry
// whose new template can never become ready.
//   - wa-ok: an ordinary update of its Service.
//   - wa-big: an oversized child (a 3.2 MB annotation, over the API
//     server's 3 MiB request limit: 413). wa-bad: a child the API server
//     refuses (port 70000: 422 Invalid). Both ApplyFailed.
//   - wa-pdb: a child kind another entry prunes: the WebApp entry no
//     longer renders nor lists PodDisruptionBudgets, the Memcached entry
//     lists the kind, so its PodDisruptionBudget is pruned.
//   - wa-paused (stencil.dev/paused) and wa-gone (being deleted, held by a
//     finalizer): left alone.
//   - wa-taken: a foreign Service holds its Service's name:
//     OwnershipConflict.
//   - shop: an AppStack whose app waits for its database, which cannot
//     be scheduled: WaitingForDependency, nothing pruned.
//   - mc-1, mc-2, mc-3: the plan lists all three updates and says the
//     rollout holds two; the controller moves one, and holds two while it
//     never becomes ready.
//
// The plan's failures and waits are exactly the controller's Ready
// reasons; the Services it updates are exactly those whose
// resourceVersion the controller changes; the children it prunes are
// those the controller deletes; the Memcacheds it does not hold are as
// many as the controller moves (which one is the order of the queue's).
func TestDiffAgreesWithTheController(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-plan-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	pdbs := schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}

	foreign := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "wa-taken", "namespace": ns},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}}
	if _, err := createOnce(ctx, admin.Resource(services).Namespace(ns), foreign); err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg, &counter{mutating: map[string]int{}}, ns)
	webApps := []string{"wa-ok", "wa-big", "wa-bad", "wa-pdb", "wa-paused", "wa-gone", "wa-taken"}
	for _, name := range webApps {
		spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(2)}
		if name == "wa-pdb" {
			spec["minAvailable"] = int64(1)
		}
		obj := cr(webapps, "WebApp", ns, name, spec)
		if name == "wa-gone" {
			obj.SetFinalizers([]string{"example.com/hold"})
		}
		if _, err := createOnce(ctx, admin.Resource(webapps).Namespace(ns), obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"mc-1", "mc-2", "mc-3"} {
		if _, err := createOnce(ctx, admin.Resource(memcacheds).Namespace(ns), cr(memcacheds, "Memcached", ns, name, map[string]any{"size": int64(1)})); err != nil {
			t.Fatal(err)
		}
	}
	shop := map[string]any{"image": "registry.k8s.io/pause:3.10", "dbNodeSelector": map[string]any{"stencil.dev/nowhere": "true"}}
	if _, err := createOnce(ctx, admin.Resource(appstacks).Namespace(ns), cr(appstacks, "AppStack", ns, "shop", shop)); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "every child of the first config", func() (bool, error) {
		for _, name := range webApps {
			if name == "wa-taken" {
				continue
			}
			if _, err := admin.Resource(services).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		for _, name := range []string{"mc-1", "mc-2", "mc-3", "shop-db"} {
			if _, err := admin.Resource(deployments).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		_, err := admin.Resource(pdbs).Namespace(ns).Get(ctx, "wa-pdb", metav1.GetOptions{})
		return err == nil, nil
	})
	r.stop(t)
	if _, err := admin.Resource(webapps).Namespace(ns).Patch(ctx, "wa-paused", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"stencil.dev/paused":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Resource(webapps).Namespace(ns).Delete(ctx, "wa-gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = admin.Resource(webapps).Namespace(ns).Patch(ctx, "wa-gone", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}()
	before := resourceVersions(ctx, t, admin, ns)

	config := editConfig(t, map[string]func(string) string{
		"stencil.yaml": func(s string) string {
			s = strings.Replace(s, "      - webapp/pdb.yaml.tmpl\n", "", 1)
			s = strings.Replace(s, "      - {apiVersion: policy/v1, kind: PodDisruptionBudget}\n", "", 1)
			return strings.Replace(s, "      - memcached/deployment.yaml.tmpl\n",
				"      - memcached/deployment.yaml.tmpl\n    rollout: {maxInFlight: 1}\n    children:\n      - {apiVersion: apps/v1, kind: Deployment}\n      - {apiVersion: policy/v1, kind: PodDisruptionBudget}\n", 1)
		},
		"webapp/service.yaml.tmpl": func(s string) string {
			s = strings.Replace(s, "    app.kubernetes.io/component: server\n",
				"    app.kubernetes.io/component: server\n    example.com/planned: \"yes\"\n  {{- if eq .Name \"wa-big\" }}\n  annotations:\n    example.com/big: {{ repeat 3200000 \"x\" | quote }}\n  {{- end }}\n", 1)
			return strings.Replace(s, `port: {{ get .Spec "port" 8080 | int64 }}`,
				`port: {{ if eq .Name "wa-bad" }}70000{{ else }}{{ get .Spec "port" 8080 | int64 }}{{ end }}`, 1)
		},
		"memcached/deployment.yaml.tmpl": func(s string) string {
			return strings.Replace(s, "    spec:\n      containers:\n", "    spec:\n      nodeSelector:\n        stencil.dev/nowhere: \"true\"\n      containers:\n", 1)
		},
	})

	status, out := runDiff(t, config, ns, "-o", "json")
	if status != 1 {
		t.Fatalf("diff: exit %d, want 1 (a plan with changes and failures, not an error)", status)
	}
	var plan struct {
		diffJSON
		Failures []struct {
			Parent  struct{ Name string } `json:"parent"`
			Reason  string                `json:"reason"`
			Message string                `json:"message"`
		} `json:"renderFailures"`
		Waiting []struct {
			Parent  struct{ Name string } `json:"parent"`
			Message string                `json:"message"`
		} `json:"waiting"`
		Held []struct {
			Parent  struct{ Name string } `json:"parent"`
			Message string                `json:"message"`
			Paused  bool                  `json:"paused"`
		} `json:"held"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	planReasons := map[string]string{}
	for _, f := range plan.Failures {
		planReasons[f.Parent.Name] = f.Reason
	}
	for _, w := range plan.Waiting {
		planReasons[w.Parent.Name] = "WaitingForDependency"
	}
	planHeld, planPaused := 0, []string{}
	for _, h := range plan.Held {
		if strings.HasPrefix(h.Message, "held by the rollout") {
			planHeld++
		}
		if h.Paused && strings.Contains(h.Message, `stencil.dev/paused is "true"`) {
			planPaused = append(planPaused, h.Parent.Name)
		}
	}
	// The paused resource is in the plan, held: what the controller does
	// with it (nothing but its status) is said, not left out.
	if !reflect.DeepEqual(planPaused, []string{"wa-paused"}) || plan.Summary.Paused != 1 {
		t.Errorf("the plan's paused resources: %v (summary %d), want wa-paused", planPaused, plan.Summary.Paused)
	}
	planServices, planPruned, planMoved := map[string]bool{}, map[string]bool{}, 0
	for _, c := range plan.Children {
		switch {
		case c.Action == "prune":
			planPruned[c.Kind+"/"+c.Name] = true
		case c.Kind == "Service" && c.Action == "update":
			planServices[c.Name] = true
		case c.Kind == "Deployment" && c.Parent.Resource == "memcacheds" && c.Action == "update":
			planMoved++
		}
	}
	wantReasons := map[string]string{"wa-big": "ApplyFailed", "wa-bad": "ApplyFailed", "wa-taken": "OwnershipConflict", "shop": "WaitingForDependency"}
	if !reflect.DeepEqual(planReasons, wantReasons) {
		t.Errorf("the plan's failures and waits: %v, want %v", planReasons, wantReasons)
	}
	if want := map[string]bool{"PodDisruptionBudget/wa-pdb": true}; !reflect.DeepEqual(planPruned, want) {
		t.Errorf("the plan's prunes: %v, want %v", planPruned, want)
	}
	if want := map[string]bool{"wa-ok": true, "wa-pdb": true}; !reflect.DeepEqual(planServices, want) {
		t.Errorf("the plan's Service updates: %v, want %v (not the paused, the deleted, the refused or the foreign one)", planServices, want)
	}
	// Every Memcached's update is listed; the rollout holds all but one
	// (maxInFlight 1), which the controller moves first.
	if planMoved != 3 || planHeld != 2 {
		t.Errorf("the plan updates %d Memcacheds and holds %d, want 3 and 2 (maxInFlight 1)", planMoved, planHeld)
	}

	r = startConfig(t, cfg, &counter{mutating: map[string]int{}}, ns, config)
	defer r.stop(t)
	reasons := map[string]string{}
	poll(t, 2*time.Minute, "the controller to act on the config", func() (bool, error) {
		reasons = map[string]string{}
		for _, res := range []schema.GroupVersionResource{webapps, appstacks} {
			list, err := admin.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				switch reason := readyReason(&list.Items[i]); reason {
				case "ApplyFailed", "OwnershipConflict", "WaitingForDependency":
					reasons[list.Items[i].GetName()] = reason
				}
			}
		}
		_, err := admin.Resource(pdbs).Namespace(ns).Get(ctx, "wa-pdb", metav1.GetOptions{})
		return len(reasons) >= len(planReasons) && apierrors.IsNotFound(err) && len(movedMemcacheds(ctx, t, admin, ns)) > 0, nil
	})
	if !reflect.DeepEqual(reasons, planReasons) {
		t.Errorf("the controller's Ready reasons: %v; the plan said %v", reasons, planReasons)
	}
	after := resourceVersions(ctx, t, admin, ns)
	changed := map[string]bool{}
	for _, name := range webApps {
		if k := "services/" + name; before[k] != after[k] {
			changed[name] = true
		}
	}
	if !reflect.DeepEqual(changed, planServices) {
		t.Errorf("Services the controller changed: %v; the plan said %v", changed, planServices)
	}
	if moved := movedMemcacheds(ctx, t, admin, ns); len(moved) != planMoved-planHeld {
		t.Errorf("the controller moved %v; the plan moves %d now (%d updates, %d held)", moved, planMoved-planHeld, planMoved, planHeld)
	}
	t.Logf("plan and controller agree: reasons %v, Services updated %v, pruned %v, Memcacheds updated %d, held %d, moved %d",
		reasons, changed, planPruned, planMoved, planHeld, planMoved-planHeld)
}

// movedMemcacheds names the Memcacheds whose Deployment carries the
// nodeSelector of the test's new template.
func movedMemcacheds(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) []string {
	t.Helper()
	var moved []string
	for _, name := range []string{"mc-1", "mc-2", "mc-3"} {
		u, err := dyn.Resource(deployments).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "nodeSelector"); sel["stencil.dev/nowhere"] == "true" {
			moved = append(moved, name)
		}
	}
	return moved
}

// TestDiffPlansWithTheLiveChildren: an AppStack whose database cannot be
// scheduled. The plan reads the live children the app's template asks
// for, as the controller does: it lists the AppStack as waiting, naming
// the template and the database's Deployment, proposes no app child and
// no prune, and writes nothing. With the database ready, the same plan
// sees the running config unchanged.
func TestDiffPlansWithTheLiveChildren(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-deps-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)

	r := start(t, cfg, &counter{mutating: map[string]int{}}, ns)
	spec := map[string]any{"image": "registry.k8s.io/pause:3.10", "dbNodeSelector": map[string]any{"stencil.dev/nowhere": "true"}}
	if _, err := createOnce(ctx, admin.Resource(appstacks).Namespace(ns), cr(appstacks, "AppStack", ns, "shop", spec)); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "shop waiting for its database", func() (bool, error) {
		u, err := admin.Resource(appstacks).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" && m["reason"] == "WaitingForDependency" {
				return true, nil
			}
		}
		return false, nil
	})
	r.stop(t)
	before := resourceVersions(ctx, t, admin, ns)

	config := filepath.Join(root, "crds", "stencil.yaml")
	_, out := runDiff(t, config, ns, "-o", "json")
	var plan struct {
		Children []struct{ Kind, Name, Action string } `json:"children"`
		Summary  struct{ Waiting int }                 `json:"summary"`
		Waiting  []struct {
			Parent  struct{ Name string } `json:"parent"`
			Message string                `json:"message"`
		} `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("the JSON plan does not parse: %v", err)
	}
	if len(plan.Waiting) != 1 || plan.Summary.Waiting != 1 || plan.Waiting[0].Parent.Name != "shop" ||
		plan.Waiting[0].Message != "app waits for Deployment/shop-db, which is not ready" {
		t.Errorf("waiting = %+v (summary %d), want shop's app waiting for Deployment/shop-db", plan.Waiting, plan.Summary.Waiting)
	}
	for _, c := range plan.Children {
		if c.Name == "shop" || c.Action == "prune" {
			t.Errorf("the plan proposes %s %s/%s while the app waits", c.Action, c.Kind, c.Name)
		}
	}
	if after := resourceVersions(ctx, t, admin, ns); !maps.Equal(before, after) {
		t.Error("the plan wrote to the cluster")
	}
	if _, err := admin.Resource(deployments).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{}); err == nil {
		t.Error("the app's Deployment exists while its database is not ready")
	}
}
