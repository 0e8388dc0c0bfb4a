//go:build integration

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// readyCondition returns the Ready condition's status, reason and
// observedGeneration, or empty strings and -1 without one.
func readyCondition(u *unstructured.Unstructured) (string, string, int64) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			status, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			return status, reason, gen
		}
	}
	return "", "", -1
}

// TestKstatus runs kstatus itself (sigs.k8s.io/cli-utils/pkg/kstatus/status,
// what Flux and Helm 4 wait with) on live WebApps and Memcacheds in every
// state stencil reports, and prints what it says in each. The config is
// testdata/kstatus: the example's with a template that fails to render a
// WebApp without spec.replicas.
func TestKstatus(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-kstatus-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)

	type row struct {
		state, message string
		got            status.Status
	}
	var rows []row
	check := func(state string, res schema.GroupVersionResource, name string, want status.Status) {
		t.Helper()
		u, err := admin.Resource(res).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := status.Compute(u)
		if err != nil {
			t.Fatalf("%s: kstatus: %v", state, err)
		}
		rows = append(rows, row{state: state, got: r.Status, message: r.Message})
		if r.Status != want {
			t.Errorf("%s: kstatus says %s (%s), want %s; status: %v", state, r.Status, r.Message, want, u.Object["status"])
		}
	}
	create := func(res schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		out, err := createOnce(ctx, admin.Resource(res).Namespace(ns), u)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	webapp := func(name string, spec map[string]any) {
		t.Helper()
		spec["image"] = "registry.k8s.io/pause:3.10"
		create(webapps, cr(webapps, "WebApp", ns, name, spec))
	}
	// waitReady waits until stencil reports Ready status/reason for the
	// WebApp's current generation.
	waitReady := func(name, wantStatus, wantReason string) {
		t.Helper()
		poll(t, 2*time.Minute, fmt.Sprintf("webapp/%s Ready=%s %s", name, wantStatus, wantReason), func() (bool, error) {
			u, err := admin.Resource(webapps).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s, reason, gen := readyCondition(u)
			return s == wantStatus && reason == wantReason && gen == u.GetGeneration(), nil
		})
	}

	// Before stencil's first status: no controller serves the namespace yet.
	// The CRDs' status default shows observedGeneration 0.
	webapp("ready", map[string]any{"replicas": int64(1)})
	create(memcacheds, cr(memcacheds, "Memcached", ns, "fresh", map[string]any{}))
	check("WebApp just created, before stencil's first status", webapps, "ready", status.InProgressStatus)
	check("Memcached just created, before stencil's first status", memcacheds, "fresh", status.InProgressStatus)
	// What the status default is for: the same object without it.
	fresh, err := admin.Resource(webapps).Namespace(ns).Get(ctx, "ready", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(fresh.Object, "status")
	if res, err := status.Compute(fresh); err != nil || res.Status != status.CurrentStatus {
		t.Errorf("kstatus on a WebApp without status says %v (err %v); the status default is there because it says Current", res, err)
	} else {
		rows = append(rows, row{state: "(the same WebApp, its status default removed)", got: res.Status, message: res.Message})
	}

	// Objects that stand in stencil's way: a foreign Service holding a
	// child's name, and one holding a node port.
	create(services, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "conflict"},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}},
	}})
	holder := create(services, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "port-holder"},
		"spec": map[string]any{"type": "NodePort", "ports": []any{map[string]any{"port": int64(80)}}},
	}})
	ports, _, _ := unstructured.NestedSlice(holder.Object, "spec", "ports")
	nodePort, _, _ := unstructured.NestedInt64(ports[0].(map[string]any), "nodePort")
	if nodePort == 0 {
		t.Fatalf("the API server allocated no node port to service/port-holder: %v", ports)
	}

	cnt := &counter{mutating: map[string]int{}}
	config := filepath.Join("testdata", "kstatus", "stencil.yaml")
	r := startConfig(t, cfg, cnt, ns, config)
	defer func() { r.stop(t) }()

	// No load balancer controller runs on the local plane: a LoadBalancer
	// Service never gets an ingress, so this WebApp keeps converging.
	webapp("converging", map[string]any{"replicas": int64(1), "serviceType": "LoadBalancer"})
	webapp("paused", map[string]any{"replicas": int64(1)})
	webapp("renderfailed", map[string]any{}) // no replicas: the template fails
	webapp("applyfailed", map[string]any{"replicas": int64(1), "serviceType": "NodePort", "nodePort": nodePort})
	webapp("conflict", map[string]any{"replicas": int64(1)})

	waitReady("ready", "True", "AllChildrenReady")
	waitReady("converging", "False", "Progressing")
	waitReady("renderfailed", "False", "RenderFailed")
	waitReady("applyfailed", "False", "ApplyFailed")
	waitReady("conflict", "False", "OwnershipConflict")
	waitReady("paused", "True", "AllChildrenReady")

	pause := func(name string) {
		t.Helper()
		if _, err := admin.Resource(webapps).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"stencil.dev/paused":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitReady(name, "False", "Paused")
	}
	pause("paused")
	// Ready=False Paused, neither Reconciling nor Stalled: kstatus reads
	// Ready.
	check("paused, no spec change since", webapps, "paused", status.InProgressStatus)
	if _, err := admin.Resource(webapps).Namespace(ns).Patch(ctx, "paused", types.MergePatchType,
		[]byte(`{"spec":{"image":"registry.k8s.io/pause:3.9"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Paused condition carries the generation stencil saw: once it is
	// the new one, stencil has chosen not to act on the change.
	waitReady("paused", "False", "Paused")

	check("converging (a LoadBalancer Service waits for an ingress)", webapps, "converging", status.InProgressStatus)
	check("paused with a spec change pending", webapps, "paused", status.InProgressStatus)
	check("RenderFailed", webapps, "renderfailed", status.FailedStatus)
	check("ApplyFailed, terminal (node port taken)", webapps, "applyfailed", status.FailedStatus)
	check("OwnershipConflict (a foreign Service)", webapps, "conflict", status.FailedStatus)
	check("Ready", webapps, "ready", status.CurrentStatus)
	// Pausing fixes nothing: Stalled stays.
	pause("renderfailed")
	check("paused after RenderFailed", webapps, "renderfailed", status.FailedStatus)

	var table strings.Builder
	table.WriteString("\n| state | kstatus says | kstatus message |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&table, "| %s | %s | %s |\n", r.state, r.got, r.message)
	}
	t.Log(table.String())

	// Every state written, neither a forced resync nor a restart writes
	// status: the status stencil computes equals the one it wrote,
	// conditions included. The Service the API server refused (ApplyFailed,
	// a taken node port) is not sent again by the same process: its render
	// has not changed (memory.Refusals); a restarted process sends it once.
	r.settle(t, 0, 6)
	cnt.reset()
	before := r.counterValue(t, "stencil_reconcile_total")
	if n := r.c.EnqueueAll(); n != 6 {
		t.Fatalf("EnqueueAll enqueued %d, want 6", n)
	}
	r.settle(t, before, 6)
	_, by := cnt.snapshot()
	t.Logf("resync over every state: mutating requests %v", by)
	if n := by["PATCH webapps/status"]; n != 0 {
		t.Errorf("a resync with nothing changed made %d status patches, want 0", n)
	}
	if n := by["PATCH services"]; n != 0 {
		t.Errorf("a resync with nothing changed sent the refused Service %d times, want 0", n)
	}
	r.stop(t)
	cnt.reset()
	r = startConfig(t, cfg, cnt, ns, config)
	r.settle(t, 0, 6)
	_, by = cnt.snapshot()
	t.Logf("restart over every state: mutating requests %v", by)
	if n := by["PATCH webapps/status"]; n != 0 {
		t.Errorf("a restart with nothing changed made %d status patches, want 0", n)
	}
}
