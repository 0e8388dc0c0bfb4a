package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// One read per change (issue 63, item 4), on the plane with status patches
// that come back as watch events: one edit of a ConfigMap N resources read
// renders each once, writes the children whose render changed and patches
// each status.reads once. Neither a reader's own status.reads patch nor
// the child it has just written renders it again (expect.Writes.WroteQuiet);
// a status edited by someone else is still set back, and a child's own
// controller making it ready still makes its resource Ready.

// readsEntry is a webapps entry that reads platform/platform-defaults
// and renders one ConfigMap, which prints the read's region when the
// resource's spec.region is true; with deployment, a Deployment too.
func readsEntry(t *testing.T, deployment bool) string {
	t.Helper()
	dir := t.TempDir()
	cm := filepath.Join(dir, "out.yaml.tmpl")
	must(t, os.WriteFile(cm, []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-out
data:
  {{- if .Spec.region }}
  region: {{ with read "defaults" }}{{ .data.region | quote }}{{ else }}"none"{{ end }}
  {{- end }}
  name: {{ .Name | quote }}
`), 0o600))
	templatesList := cm
	children := "{apiVersion: v1, kind: ConfigMap}"
	if deployment {
		abs, err := filepath.Abs(filepath.Join("reconcile", "testdata", "webapp", "deployment.yaml.tmpl"))
		must(t, err)
		templatesList += ", " + abs
		children += ", {apiVersion: apps/v1, kind: Deployment}"
	}
	return writeConfig(t, dir, `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [`+templatesList+`]
    children: [`+children+`]
    reads:
      - {name: defaults, apiVersion: v1, kind: ConfigMap, objectName: platform-defaults, namespace: platform}
`)
}

// countingWall renders in this process and counts the renders of each
// resource by name.
type countingWall struct {
	mu sync.Mutex
	n  map[string]int
}

// Render implements templates.Wall.
func (w *countingWall) Render(s *templates.Set, parent *view.Object, live templates.Live) (*templates.Result, error) {
	w.mu.Lock()
	w.n[parent.Name]++
	w.mu.Unlock()
	return s.RenderHere(parent, live, nil)
}

// take returns the counts so far and starts again from zero.
func (w *countingWall) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n
	w.n = map[string]int{}
	return n
}

// total is the number of renders counted so far.
func (w *countingWall) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	sum := 0
	for _, n := range w.n {
		sum += n
	}
	return sum
}

// counter sums a counter of the plane's metrics over its labels.
func (p *plane) counter(name string) float64 {
	p.t.Helper()
	mfs, err := p.metrics.Registry.Gather()
	must(p.t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// settle waits until the queue is empty and no sync has run for 300ms.
func (p *plane) settle() {
	p.t.Helper()
	last, quiet := -1.0, 0
	p.eventually("the controller settles", func() bool {
		n := p.counter("stencil_reconcile_total")
		if n != last || p.c.queue.Len() > 0 {
			last, quiet = n, 0
			return false
		}
		quiet++
		time.Sleep(40 * time.Millisecond)
		return quiet >= 6
	})
}

// get returns the stored object g/ns/name.
func (p *plane) get(g schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	p.t.Helper()
	u, err := p.client.Resource(g).Namespace(ns).Get(p.ctx, name, metav1.GetOptions{})
	must(p.t, err)
	return u
}

// update stores u under a new resourceVersion, as another writer would.
func (p *plane) update(g schema.GroupVersionResource, u *unstructured.Unstructured) {
	p.t.Helper()
	u.SetResourceVersion(fmt.Sprint(p.rv.Add(1)))
	must(p.t, p.client.Tracker().Update(g, u, u.GetNamespace()))
}

// readsVersion returns the resourceVersion status.reads names for the
// platform ConfigMap ("" if none).
func readsVersion(u *unstructured.Unstructured) string {
	reads, _, _ := unstructured.NestedSlice(u.Object, "status", "reads")
	for _, r := range reads {
		if m, ok := r.(map[string]any); ok && m["name"] == "platform-defaults" {
			rv, _ := m["resourceVersion"].(string)
			return rv
		}
	}
	return ""
}

// readyStatus returns the status of u's Ready condition.
func readyStatus(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func platformDefaults(region string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "platform-defaults", "namespace": "platform", "uid": "uid-platform-defaults", "resourceVersion": "1"},
		"data":     map[string]any{"region": region}}}
}

// TestOneReadEditRendersEachReaderOnce: N readers of one ConfigMap, half of
// which print its region; one edit of it costs each reader exactly one
// sync and one render, N/2 child writes and N status patches.
func TestOneReadEditRendersEachReaderOnce(t *testing.T) {
	const n = 20
	objs := []*unstructured.Unstructured{crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), platformDefaults("eu-west-1")}
	for i := range n {
		objs = append(objs, webapp(fmt.Sprintf("r%02d", i), map[string]any{"region": i%2 == 0}))
	}
	wall := &countingWall{n: map[string]int{}}
	p := startPlaneWith(t, readsEntry(t, false), planeOptions{statusPatches: true, wall: wall}, objs...)
	p.eventually("every reader's status.reads names the ConfigMap", func() bool {
		for i := range n {
			if readsVersion(p.get(webappGVR, "ns", fmt.Sprintf("r%02d", i))) != "1" {
				return false
			}
		}
		return true
	})
	p.settle()
	created := wall.take()

	before := map[string]float64{}
	for _, m := range []string{"stencil_reconcile_total", "stencil_renders_total", "stencil_status_patches_total", "stencil_child_writes_total"} {
		before[m] = p.counter(m)
	}
	cm := p.get(configMapGVR, "platform", "platform-defaults")
	must(t, unstructured.SetNestedField(cm.Object, "us-east-2", "data", "region"))
	p.update(configMapGVR, cm)
	edited := cm.GetResourceVersion()
	p.eventually("every reader read the edit and every regional child prints it", func() bool {
		for i := range n {
			name := fmt.Sprintf("r%02d", i)
			if readsVersion(p.get(webappGVR, "ns", name)) != edited {
				return false
			}
			region, _, _ := unstructured.NestedString(p.get(configMapGVR, "ns", name+"-out").Object, "data", "region")
			if i%2 == 0 && region != "us-east-2" {
				return false
			}
		}
		return true
	})
	p.settle()
	renders := wall.take()
	delta := func(m string) float64 { return p.counter(m) - before[m] }
	t.Logf("%d readers created: %d renders; one edit of the ConfigMap they read: %v renders per reader, %.0f syncs, %.0f renders counted by stencil_renders_total, %.0f child writes, %.0f status patches",
		n, sumOf(created), renders, delta("stencil_reconcile_total"), delta("stencil_renders_total"), delta("stencil_child_writes_total"), delta("stencil_status_patches_total"))
	// A reader queued again while its sync ran (a sync that read its
	// cache while one of its own writes was pending must look again:
	// expect.Looking) renders once more. That is timing: without the race
	// detector 0 of 20 here, under it 1 to 3 of 20 in five runs (2026-11-28).
	// More than two renders for one reader, or a second render for more
	// than a quarter of them, is the second render per reader this test
	// is about (before the quiet writes: all 20 rendered twice).
	extra := 0
	for i := range n {
		name := fmt.Sprintf("r%02d", i)
		switch r := renders[name]; {
		case r < 1 || r > 2:
			t.Errorf("reader %s rendered %d times for one edit of what it reads, want 1", name, r)
		case r == 2:
			extra++
		}
	}
	if extra > n/4 {
		t.Errorf("%d of %d readers rendered twice for one edit of what they read, want 1 render each (at most %d re-synced by timing)", extra, n, n/4)
	}
	if got := delta("stencil_reconcile_total"); got < n || got > n+float64(n/4) {
		t.Errorf("%.0f syncs for one edit read by %d readers, want %d (at most %d more)", got, n, n, n/4)
	}
	if got := delta("stencil_renders_total"); got != float64(n+extra) {
		t.Errorf("stencil_renders_total grew by %.0f, want %d (the renders counted here)", got, n+extra)
	}
	if got := delta("stencil_child_writes_total"); got != n/2 {
		t.Errorf("%.0f child writes, want %d (the children that print the region)", got, n/2)
	}
	if got := delta("stencil_status_patches_total"); got != n {
		t.Errorf("%.0f status patches, want %d (each reader's status.reads)", got, n)
	}

	// Someone else's status edit is still set back.
	r := p.get(webappGVR, "ns", "r01")
	phase, _, _ := unstructured.NestedString(r.Object, "status", "phase")
	must(t, unstructured.SetNestedField(r.Object, "Tampered", "status", "phase"))
	p.update(webappGVR, r)
	p.eventually("a status edited by someone else is set back", func() bool {
		got, _, _ := unstructured.NestedString(p.get(webappGVR, "ns", "r01").Object, "status", "phase")
		return got == phase
	})
}

func sumOf(m map[string]int) int {
	sum := 0
	for _, v := range m {
		sum += v
	}
	return sum
}

// TestReadyFollowsAChildsOwnControllerAfterAQuietWrite: a reader's
// Deployment, written by stencil (a quiet write, whose event queues
// nothing), becomes ready when its own controller says so, and that event
// makes the reader Ready.
func TestReadyFollowsAChildsOwnControllerAfterAQuietWrite(t *testing.T) {
	wall := &countingWall{n: map[string]int{}}
	p := startPlaneWith(t, readsEntry(t, true), planeOptions{statusPatches: true, wall: wall},
		crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"), platformDefaults("eu-west-1"),
		webapp("a", map[string]any{"region": true, "replicas": int64(1), "image": "nginx"}))
	p.eventually("the reader reports, not Ready", func() bool {
		u := p.get(webappGVR, "ns", "a")
		return readsVersion(u) == "1" && readyStatus(u) == "False"
	})
	p.settle()
	t.Logf("a new reader with a Deployment: %d renders until it settles (its first status patch is not quiet: it changes conditions)", wall.total())

	// The Deployment controller's status write.
	d := p.get(deploymentGVR, "ns", "a")
	d.SetGeneration(1)
	must(t, unstructured.SetNestedField(d.Object, map[string]any{
		"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
		},
	}, "status"))
	p.update(deploymentGVR, d)
	p.eventually("the reader is Ready once its Deployment is", func() bool { return readyStatus(p.get(webappGVR, "ns", "a")) == "True" })
}
