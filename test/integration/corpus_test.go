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
)

var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// corpusChild is one child the corpus renders for a WebApp named "c".
type corpusChild struct {
	res  schema.GroupVersionResource
	name string
}

func (c corpusChild) String() string { return c.res.Resource + "/" + c.name }

var corpusChildren = []corpusChild{
	{deployments, "c-quantities"}, {deployments, "c-defaults"}, {deployments, "c-probes"},
	{deployments, "c-zero"}, {services, "c-named"}, {services, "c-numbered"},
}

// handEdit is one class of hand edit to a templated field: a patch by
// another field manager, and how to tell that stencil set the field back.
type handEdit struct {
	class string
	child corpusChild
	patch string // strategic merge patch
	back  func(*unstructured.Unstructured) bool
}

func webContainer(u *unstructured.Unstructured) map[string]any {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["name"] == "web" {
			return m
		}
	}
	return map[string]any{}
}

var handEdits = []handEdit{
	{class: "scalar (image)", child: corpusChildren[0],
		patch: `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.k8s.io/pause:evil"}]}}}}`,
		back: func(u *unstructured.Unstructured) bool {
			return webContainer(u)["image"] == "registry.k8s.io/pause:3.10"
		}},
	{class: "quantity (limits.cpu)", child: corpusChildren[0],
		patch: `{"spec":{"template":{"spec":{"containers":[{"name":"web","resources":{"limits":{"cpu":"2"}}}]}}}}`,
		back: func(u *unstructured.Unstructured) bool {
			cpu, _, _ := unstructured.NestedString(webContainer(u), "resources", "limits", "cpu")
			return cpu == "1"
		}},
	{class: "atomic list element (args)", child: corpusChildren[2],
		patch: `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--port","8080","--verbose=false","--debug"]}]}}}}`,
		back: func(u *unstructured.Unstructured) bool {
			args, _, _ := unstructured.NestedStringSlice(webContainer(u), "args")
			return strings.Join(args, " ") == "--port 8080 --verbose=false"
		}},
	{class: "merge-list element (env MODE)", child: corpusChildren[2],
		patch: `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"MODE","value":"debug"}]}]}}}}`,
		back: func(u *unstructured.Unstructured) bool {
			env, _, _ := unstructured.NestedSlice(webContainer(u), "env")
			for _, e := range env {
				if m, _ := e.(map[string]any); m["name"] == "MODE" {
					return m["value"] == "prod"
				}
			}
			return false
		}},
	{class: "label", child: corpusChildren[4],
		patch: `{"metadata":{"labels":{"case":"hacked"}}}`,
		back:  func(u *unstructured.Unstructured) bool { return u.GetLabels()["case"] == "service-named" }},
}

// TestCorpusCostsZeroWritesOnceConverged runs realistic templates (the
// corpus in testdata/corpus: quantities as numbers and strings, defaults
// written out, false booleans, empty strings, zero replicas, probes, env,
// volumes, atomic lists, named and numbered ports) against the real API
// server, which normalises what it stores. Each child must cost no write on
// a forced resync, over 60s in which a pod is replaced, and on a restart; a
// hand edit of each class of templated field is set back with one apply and
// no FieldFight.
func TestCorpusCostsZeroWritesOnceConverged(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-corpus-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	config := filepath.Join("testdata", "corpus", "stencil.yaml")

	cnt := &counter{mutating: map[string]int{}}
	r := startConfig(t, cfg, cnt, ns, config)
	defer func() { r.stop(t) }()

	w := cr(webapps, "WebApp", ns, "c", map[string]any{"image": "registry.k8s.io/pause:3.10", "replicas": int64(1)})
	if _, err := createOnce(ctx, admin.Resource(webapps).Namespace(ns), w); err != nil {
		t.Fatal(err)
	}
	waitReady := func(what string) {
		t.Helper()
		poll(t, 3*time.Minute, what, func() (bool, error) {
			u, err := admin.Resource(webapps).Namespace(ns).Get(ctx, "c", metav1.GetOptions{})
			return err == nil && isReady(u), err
		})
	}
	waitReady("the corpus WebApp Ready")
	r.settle(t, 0, 1)
	created := map[corpusChild]int{}
	for _, c := range corpusChildren {
		created[c] = cnt.writesTo(c.String())
	}
	t.Logf("create: %d dry runs", cnt.dryRuns.Load())

	// A forced resync.
	cnt.reset()
	before := r.counterValue(t, "stencil_reconcile_total")
	r.c.EnqueueAll()
	r.settle(t, before, 1)
	resync := map[corpusChild]int{}
	for _, c := range corpusChildren {
		resync[c] = cnt.writesTo(c.String())
	}
	resyncDry := cnt.dryRuns.Load()

	// 60s in which a pod of the quantities Deployment is deleted and
	// replaced: the Deployment's status changes wake the WebApp, which must
	// cost no child write.
	cnt.reset()
	window := time.Now()
	podList, err := admin.Resource(pods).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "case=quantities"})
	if err != nil || len(podList.Items) == 0 {
		t.Fatalf("no pod of c-quantities to delete (err %v)", err)
	}
	victim := podList.Items[0].GetName()
	if err := admin.Resource(pods).Namespace(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "a replacement pod of c-quantities", func() (bool, error) {
		list, err := admin.Resource(pods).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "case=quantities"})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.GetName() != victim && p.GetDeletionTimestamp() == nil {
				return true, nil
			}
		}
		return false, nil
	})
	waitReady("the corpus WebApp Ready after the pod was replaced")
	poll(t, 2*time.Minute, "the end of the 60s window", func() (bool, error) {
		return time.Since(window) >= 60*time.Second, nil
	})
	r.settle(t, 0, 0)
	windowWrites := 0
	for _, c := range corpusChildren {
		windowWrites += cnt.writesTo(c.String())
	}
	reconciles := r.counterValue(t, "stencil_reconcile_total") - before
	t.Logf("60s window with pod %s replaced: %d child writes, %d status patches, %d dry runs, %.0f reconciles since the resync",
		victim, windowWrites, cnt.writesTo("webapps/c"), cnt.dryRuns.Load(), reconciles)
	if windowWrites != 0 {
		_, by := cnt.snapshot()
		t.Errorf("the 60s window cost %d child writes, want 0: %v", windowWrites, by)
	}

	// A restart: new process, empty caches and memos.
	r.stop(t)
	cnt.reset()
	r = startConfig(t, cfg, cnt, ns, config)
	r.settle(t, 0, 1)
	restart := map[corpusChild]int{}
	for _, c := range corpusChildren {
		restart[c] = cnt.writesTo(c.String())
	}
	restartDry := cnt.dryRuns.Load()
	restartTotal, restartBy := cnt.snapshot()

	for _, c := range corpusChildren {
		t.Logf("%-26s create %d writes, resync %d, restart %d", c, created[c], resync[c], restart[c])
		if resync[c] != 0 || restart[c] != 0 {
			t.Errorf("%s: %d writes on resync and %d on restart, want 0 and 0", c, resync[c], restart[c])
		}
	}
	t.Logf("dry runs: resync %d, restart %d; all mutating requests on restart: %d %v", resyncDry, restartDry, restartTotal, restartBy)
	if restartTotal != 0 {
		t.Errorf("a restart made %d mutating requests, want 0: %v", restartTotal, restartBy)
	}

	// Hand edits, one class at a time.
	edited := dynamic.NewForConfigOrDie(cfg)
	for _, e := range handEdits {
		cnt.reset()
		before := r.counterValue(t, "stencil_reconcile_total")
		if _, err := edited.Resource(e.child.res).Namespace(ns).Patch(ctx, e.child.name, types.StrategicMergePatchType,
			[]byte(e.patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatalf("%s: %v", e.class, err)
		}
		poll(t, time.Minute, e.class+" set back on "+e.child.String(), func() (bool, error) {
			u, err := admin.Resource(e.child.res).Namespace(ns).Get(ctx, e.child.name, metav1.GetOptions{})
			return err == nil && e.back(u), err
		})
		r.settle(t, before, 1)
		writes := cnt.writesTo(e.child.String())
		t.Logf("hand edit of a %s on %s: set back with %d write(s), %d dry runs", e.class, e.child, writes, cnt.dryRuns.Load())
		if writes != 1 {
			t.Errorf("hand edit of a %s cost %d writes to %s, want 1", e.class, writes, e.child)
		}
	}
	u, err := admin.Resource(webapps).Namespace(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Throttled" {
			t.Errorf("hand edits made the WebApp Throttled: %v", m)
		}
	}
	events, err := admin.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).
		List(ctx, metav1.ListOptions{FieldSelector: "reason=FieldFight"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 0 {
		t.Errorf("hand edits recorded %d FieldFight events, want 0", len(events.Items))
	}

	// The hand edits above used the fight guard's burst: a new process
	// starts the real fight with a full bucket.
	r.stop(t)
	r = startConfig(t, cfg, cnt, ns, config)
	r.settle(t, 0, 1)
	cnt.reset()
	realFight(ctx, t, cnt, edited, admin, ns)
}

// realFight is the other side of the hand-edit check: a writer that sets
// the image back every time it sees stencil's correction is a real fight,
// and is still detected and throttled once stencil waits for its own writes
// to reach the cache.
func realFight(ctx context.Context, t *testing.T, cnt *counter, edited, admin dynamic.Interface, ns string) {
	t.Helper()
	e := handEdits[0]
	reverts := 0
	start := time.Now()
	poll(t, 2*time.Minute, "the WebApp Throttled by a writer that keeps reverting the image", func() (bool, error) {
		u, err := admin.Resource(webapps).Namespace(ns).Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Throttled" && m["status"] == "True" {
				return true, nil
			}
		}
		child, err := admin.Resource(e.child.res).Namespace(ns).Get(ctx, e.child.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if e.back(child) {
			// stencil's correction is visible: take the field back.
			reverts++
			_, err = edited.Resource(e.child.res).Namespace(ns).Patch(ctx, e.child.name, types.StrategicMergePatchType,
				[]byte(e.patch), metav1.PatchOptions{FieldManager: "fighter"})
		}
		return false, err
	})
	events, err := admin.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).
		List(ctx, metav1.ListOptions{FieldSelector: "reason=FieldFight"})
	if err != nil {
		t.Fatal(err)
	}
	corrections := cnt.writesTo(e.child.String())
	t.Logf("real fight: Throttled after %d reverts and %d corrections in %s; %d FieldFight events",
		reverts, corrections, time.Since(start).Round(100*time.Millisecond), len(events.Items))
	// The default burst is 5 corrections; the 6th revert is not corrected.
	if corrections != 5 || reverts != 6 {
		t.Errorf("a real fight was throttled after %d reverts and %d corrections, want 6 and the burst of 5", reverts, corrections)
	}
	if len(events.Items) != 1 || !strings.Contains(fmt.Sprint(events.Items[0].Object["message"]), "fighter") {
		t.Errorf("a real fight recorded %d FieldFight events, want 1 naming the fighter", len(events.Items))
	}
}
