//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/controller"
)

// Reads (DESIGN.md, "reads"), on the real API server: a Reader reads the
// platform's defaults (a ConfigMap in the platform's namespace, by a
// fixed name), a Secret its spec names (required; key names only) and
// its peers (Readers of the same tier, by a computed selector), and
// renders one ConfigMap from them.

var (
	readers    = schema.GroupVersionResource{Group: "reads.stencil.dev", Version: "v1", Resource: "readers"}
	configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

const readersCRD = "readers.reads.stencil.dev"

func readsConfig(platformNS string) string {
	return `resources:
  - group: reads.stencil.dev
    version: v1
    resource: readers
    kind: Reader
    schema:
      spec:
        passwordSecret: string
        region: boolean
        regionOverride: string
        tier: string
    children: [{apiVersion: v1, kind: ConfigMap}]
    templates: [out.yaml.tmpl]
    reads:
      - {name: defaults, apiVersion: v1, kind: ConfigMap, objectName: platform-defaults, namespace: ` + platformNS + `}
      - {name: password, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.passwordSecret }}", required: true}
      - name: peers
        apiVersion: reads.stencil.dev/v1
        kind: Reader
        selector: {matchLabels: {tier: "{{ .Spec.tier }}"}}
`
}

const readsTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-out
data:
  keys: {{ keys (read "password").data | sortAlpha | join "," | quote }}
  {{- if get .Spec "region" false }}
  region: {{ with get .Spec "regionOverride" "" }}{{ . | quote }}{{ else }}{{ with read "defaults" }}{{ .data.region | quote }}{{ else }}"none"{{ end }}{{ end }}
  {{- end }}
  peers: {{ range (read "peers") }}{{ .metadata.name }} {{ end }}
`

// startReaders writes the config, starts a controller over ns that
// manages the Reader CRD, and waits until it is served.
func startReaders(ctx context.Context, t testing.TB, cnt *counter, ns, platformNS string, edits ...func(*controller.Options)) (*running, string) {
	t.Helper()
	cfg := restConfig(t)
	admin := dynamic.NewForConfigOrDie(cfg)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out.yaml.tmpl"), []byte(readsTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(readsConfig(platformNS)), 0o644); err != nil {
		t.Fatal(err)
	}
	freshCRDs(ctx, t, admin, readersCRD)
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) {
		o.ManageCRDs = true
		for _, edit := range edits {
			edit(o)
		}
	})
	poll(t, time.Minute, "the Reader CRD, established", func() (bool, error) {
		_, err := admin.Resource(readers).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	return r, path
}

func reader(ns, name string, lbls map[string]any, spec map[string]any) *unstructured.Unstructured {
	u := cr(readers, "Reader", ns, name, spec)
	if lbls != nil {
		u.Object["metadata"].(map[string]any)["labels"] = lbls
	}
	return u
}

func object(gvr schema.GroupVersionResource, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// readCondition returns the Ready condition's status, reason and message.
func readCondition(u *unstructured.Unstructured) (string, string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// statusReads lists status.reads as "Kind ns/name@rv".
func statusReads(u *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "reads")
	var out []string
	for _, item := range list {
		m, _ := item.(map[string]any)
		out = append(out, fmt.Sprintf("%s %s/%s@%s", m["kind"], m["namespace"], m["name"], m["resourceVersion"]))
	}
	return out
}

// quiet waits for r's queue to drain, then fails if it makes any
// mutating request in the next 15 s: what converged stays converged.
func quiet(t *testing.T, r *running, cnt *counter, what string) {
	t.Helper()
	r.settle(t, r.counterValue(t, "stencil_reconcile_total"), 0)
	cnt.reset()
	began := time.Now()
	for time.Since(began) < 15*time.Second {
		if total, by := cnt.snapshot(); total != 0 {
			t.Fatalf("%s keeps writing: %d mutating requests in %s: %v", what, total, time.Since(began).Round(time.Millisecond), by)
		}
		time.Sleep(time.Second) // the measurement's window, not a wait for the controller
	}
}

// TestReads: a required read that is missing holds the resource
// (WaitingForRead, no child written) until it is created, then Ready
// within 30 s, status.reads naming what it read; a Secret the tenant
// names shows its key names, never its data; a Secret of another
// namespace reads nothing; Readers that read each other converge and then
// write nothing.
func TestReads(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	suffix := time.Now().UnixNano() % 100000
	ns, platform, other := fmt.Sprintf("it-reads-%d", suffix), fmt.Sprintf("it-platform-%d", suffix), fmt.Sprintf("it-other-%d", suffix)
	for _, n := range []string{ns, platform, other} {
		newNamespace(ctx, t, admin, n)
	}
	if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(platform), object(configmaps, "ConfigMap", platform, "platform-defaults",
		map[string]any{"data": map[string]any{"region": "eu-west-1"}})); err != nil {
		t.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r, _ := startReaders(ctx, t, cnt, ns, platform)
	defer r.stop(t)
	ri := admin.Resource(readers).Namespace(ns)

	// A required read that does not exist: WaitingForRead, nothing written.
	if _, err := createOnce(ctx, ri, reader(ns, "waiting", nil, map[string]any{"passwordSecret": "db", "region": true})); err != nil {
		t.Fatal(err)
	}
	var msg string
	poll(t, time.Minute, "waiting: Ready False, WaitingForRead", func() (bool, error) {
		u, err := ri.Get(ctx, "waiting", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, reason, m := readCondition(u)
		msg = m
		return status == "False" && reason == "WaitingForRead", nil
	})
	t.Logf("waiting: WaitingForRead: %s", msg)
	if !strings.Contains(msg, "Secret "+ns+"/db") {
		t.Errorf("the message does not name the Secret it waits for: %q", msg)
	}
	if _, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "waiting-out", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a child was written while a required read was missing: %v", err)
	}
	if n := cnt.writesTo("configmaps/waiting-out"); n != 0 {
		t.Errorf("%d writes to the child while a required read was missing", n)
	}

	// Created: Ready within 30 s, the Secret's key names and no data.
	const password = "cGxhdGZvcm0tc2VjcmV0" // base64 of platform-secret
	if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(ns), object(secrets, "Secret", ns, "db",
		map[string]any{"data": map[string]any{"password": password, "user": "YWRtaW4="}})); err != nil {
		t.Fatal(err)
	}
	// The tenant names a Secret that exists only in another namespace.
	if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(other), object(secrets, "Secret", other, "theirs",
		map[string]any{"data": map[string]any{"token": password}})); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	var waiting *unstructured.Unstructured
	poll(t, 30*time.Second, "waiting: Ready once its Secret exists", func() (bool, error) {
		u, err := ri.Get(ctx, "waiting", metav1.GetOptions{})
		waiting = u
		return err == nil && readyTrue(u), nil
	})
	t.Logf("waiting: Ready %s after its Secret was created", time.Since(created).Round(time.Millisecond))
	child, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "waiting-out", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(child.Object, "data")
	if data["keys"] != "password,user" || data["region"] != "eu-west-1" {
		t.Errorf("child data = %v, want keys password,user and region eu-west-1", data)
	}
	if text := fmt.Sprint(child.Object); strings.Contains(text, password) || strings.Contains(text, "platform-secret") {
		t.Errorf("the child holds the Secret's data: %v", data)
	}
	got := statusReads(waiting)
	t.Logf("waiting: status.reads = %v", got)
	if len(got) != 2 || !strings.HasPrefix(got[0], "ConfigMap "+platform+"/platform-defaults@") || !strings.HasPrefix(got[1], "Secret "+ns+"/db@") {
		t.Errorf("status.reads = %v, want the platform's ConfigMap and the Secret, with resourceVersions", got)
	}

	if _, err := createOnce(ctx, ri, reader(ns, "stranger", nil, map[string]any{"passwordSecret": "theirs"})); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "stranger: WaitingForRead (its Secret is in another namespace)", func() (bool, error) {
		u, err := ri.Get(ctx, "stranger", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, reason, _ := readCondition(u)
		if status == "True" {
			return false, fmt.Errorf("stranger became Ready reading a Secret of namespace %s", other)
		}
		for _, ref := range statusReads(u) {
			if strings.Contains(ref, "theirs") {
				return false, fmt.Errorf("stranger read %s", ref)
			}
		}
		return reason == "WaitingForRead", nil
	})

	// Peers: three Readers of one tier read each other. They converge,
	// and then nothing is written: a status patch of one does not
	// re-render the others.
	peers := []string{"p1", "p2", "p3"}
	for _, name := range peers {
		if _, err := createOnce(ctx, ri, reader(ns, name, map[string]any{"tier": "gold"}, map[string]any{"passwordSecret": "db", "tier": "gold"})); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, time.Minute, "the peers Ready, each listing all three", func() (bool, error) {
		for _, name := range peers {
			u, err := ri.Get(ctx, name, metav1.GetOptions{})
			if err != nil || !readyTrue(u) {
				return false, nil
			}
			c, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, name+"-out", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if p, _, _ := unstructured.NestedString(c.Object, "data", "peers"); strings.TrimSpace(p) != "p1 p2 p3" {
				return false, nil
			}
		}
		return true, nil
	})
	quiet(t, r, cnt, "readers that read each other")
	t.Logf("peers: 0 mutating requests in 15 s once converged")

	// Another writer changes p1's status: stencil puts it back, and the
	// others, which read p1, neither render differently nor write.
	cnt.reset()
	if _, err := ri.Patch(ctx, "p1", types.MergePatchType, []byte(`{"status":{"phase":"Tampered"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "p1's phase put back", func() (bool, error) {
		u, err := ri.Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Ready", nil
	})
	r.settle(t, r.counterValue(t, "stencil_reconcile_total"), 0)
	others := cnt.writesTo("readers/p2") + cnt.writesTo("readers/p3") + cnt.writesTo("configmaps/p2-out") + cnt.writesTo("configmaps/p3-out")
	t.Logf("a status patch of p1 by another writer: %d writes to p1, %d to the peers that read it", cnt.writesTo("readers/p1"), others)
	if others != 0 {
		total, by := cnt.snapshot()
		t.Errorf("a status patch of p1 made %d writes for the Readers that read it (%d in all: %v)", others, total, by)
	}
}

// fanOut is one run of the fan-out: n Readers in ns, half of which
// print the platform's region, and the change of that region.
type fanOut struct {
	t     testing.TB
	ctx   context.Context
	admin dynamic.Interface
	ns    string
	n     int
}

// create creates the Readers and waits until all are Ready with their
// children written.
func (f fanOut) create() {
	t := f.t
	ri := f.admin.Resource(readers).Namespace(f.ns)
	var wg sync.WaitGroup
	errs := make(chan error, f.n)
	sem := make(chan struct{}, 16)
	for i := range f.n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := createOnce(f.ctx, ri, reader(f.ns, fmt.Sprintf("r%04d", i), nil, map[string]any{"passwordSecret": "db", "region": i%2 == 0})); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	poll(t, 10*time.Minute, fmt.Sprintf("%d Readers Ready", f.n), func() (bool, error) {
		list, err := ri.List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, u := range list.Items {
			if readyTrue(&u) {
				ready++
			}
		}
		return ready == f.n, nil
	})
	children := 0
	f.children(func(string, *unstructured.Unstructured) { children++ })
	if children != f.n {
		t.Fatalf("%d children for %d Readers", children, f.n)
	}
}

// children calls fn with each child ConfigMap of the Readers.
func (f fanOut) children(fn func(name string, c *unstructured.Unstructured)) {
	list, err := f.admin.Resource(configmaps).Namespace(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.Items {
		if name, ok := strings.CutSuffix(list.Items[i].GetName(), "-out"); ok {
			fn(name, &list.Items[i])
		}
	}
}

// waitRegion waits until every child that prints the region prints want;
// it returns the time that took.
func (f fanOut) waitRegion(want string) time.Duration {
	began := time.Now()
	poll(f.t, 5*time.Minute, fmt.Sprintf("%d children printing region %s", f.n/2, want), func() (bool, error) {
		done := 0
		f.children(func(_ string, c *unstructured.Unstructured) {
			if r, _, _ := unstructured.NestedString(c.Object, "data", "region"); r == want {
				done++
			}
		})
		return done == f.n/2, nil
	})
	return time.Since(began)
}

// changed returns how many children's resourceVersions differ from rvs,
// as the API server stores them, split by whether they print the region.
func (f fanOut) changed(rvs map[string]string) (regional, others int) {
	f.children(func(name string, c *unstructured.Unstructured) {
		if c.GetResourceVersion() == rvs[name] {
			return
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(name, "r"))
		if i%2 == 0 {
			regional++
		} else {
			others++
		}
	})
	return regional, others
}

// fanOutRun is what one change of the fan-out came to.
type fanOutRun struct {
	// took is the time from the change to the last child written.
	took       time.Duration
	reconciles float64
	// renders counts the renders the syncs ran (stencil_renders_total).
	renders float64
	// regional and others count the children the API server stores with
	// a new resourceVersion, those that print the region and the others.
	regional, others int
	// childWrites counts stencil's writes to children; total all its
	// mutating requests, by.
	childWrites, total int
	by                 map[string]int
}

// measure makes change, which sets the region the regional children
// print to region, and measures what stencil does until it settles.
func (f fanOut) measure(r *running, cnt *counter, region string, change func()) fanOutRun {
	rvs := map[string]string{}
	f.children(func(name string, c *unstructured.Unstructured) { rvs[name] = c.GetResourceVersion() })
	cnt.reset()
	before := r.counterValue(f.t, "stencil_reconcile_total")
	rendersBefore := r.counterValue(f.t, "stencil_renders_total")
	began := time.Now()
	change()
	f.waitRegion(region)
	run := fanOutRun{took: time.Since(began)}
	r.settle(f.t, before, f.n)
	run.reconciles = r.counterValue(f.t, "stencil_reconcile_total") - before
	run.renders = r.counterValue(f.t, "stencil_renders_total") - rendersBefore
	run.regional, run.others = f.changed(rvs)
	cnt.mu.Lock()
	for obj, n := range cnt.byObject {
		if strings.HasPrefix(obj, "configmaps/") {
			run.childWrites += n
		}
	}
	cnt.mu.Unlock()
	run.total, run.by = cnt.snapshot()
	return run
}

// editDefaults sets the platform ConfigMap's region.
func (f fanOut) editDefaults(platform, region string) func() {
	return func() {
		cms := f.admin.Resource(configmaps).Namespace(platform)
		cm, err := cms.Get(f.ctx, "platform-defaults", metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		_ = unstructured.SetNestedField(cm.Object, region, "data", "region")
		if _, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// readersN is how many Readers TestReadFanOut creates
// (STENCIL_READERS, default 1000).
func readersN(t testing.TB) int {
	if v := os.Getenv("STENCIL_READERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("STENCIL_READERS=%q: want a number of at least 2", v)
		}
		return n
	}
	return 1000
}

// TestReadFanOut: one platform ConfigMap read by 1,000 Readers, half of
// which print its region, edited once: every Reader renders again, the
// children whose render changed are written (counted at the API server:
// their resourceVersions) and no other; the time from the edit to the
// last child written is printed. Then a minute with nothing changing
// costs no request, a restart writes nothing, and stencil diff, reading
// live, shows a second edit as exactly the children it changes.
func TestReadFanOut(t *testing.T) {
	ctx := context.Background()
	cfg := restConfig(t)
	admin := dynamic.NewForConfigOrDie(cfg)
	suffix := time.Now().UnixNano() % 100000
	ns, platform := fmt.Sprintf("it-fanout-%d", suffix), fmt.Sprintf("it-fanout-platform-%d", suffix)
	newNamespace(ctx, t, admin, ns)
	newNamespace(ctx, t, admin, platform)
	if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(platform), object(configmaps, "ConfigMap", platform, "platform-defaults", map[string]any{"data": map[string]any{"region": "eu-west-1"}})); err != nil {
		t.Fatal(err)
	}
	if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(ns), object(secrets, "Secret", ns, "db", map[string]any{"data": map[string]any{"password": "eA=="}})); err != nil {
		t.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r, path := startReaders(ctx, t, cnt, ns, platform)
	defer r.stop(t)
	f := fanOut{t: t, ctx: ctx, admin: admin, ns: ns, n: readersN(t)}
	began := time.Now()
	f.create()
	t.Logf("%d Readers Ready in %s", f.n, time.Since(began).Round(time.Millisecond))
	r.settle(t, r.counterValue(t, "stencil_reconcile_total"), 0)

	// The edit.
	run := f.measure(r, cnt, "us-east-2", f.editDefaults(platform, "us-east-2"))
	t.Logf("edit of the platform ConfigMap read by %d Readers: last child written %s after the edit; %.0f reconciles, %.0f renders (%.2f per Reader); children changed at the API server: %d printing the region, %d others; %d child writes, %d mutating requests in all (%v)",
		f.n, run.took.Round(time.Millisecond), run.reconciles, run.renders, run.renders/float64(f.n), run.regional, run.others, run.childWrites, run.total, run.by)
	if run.regional != f.n/2 || run.others != 0 || run.childWrites != f.n/2 {
		t.Errorf("want exactly the %d children that print the region written: %d of them changed, %d others, %d child writes", f.n/2, run.regional, run.others, run.childWrites)
	}
	if run.reconciles < float64(f.n) {
		t.Errorf("%.0f reconciles after the edit, want every one of the %d Readers rendered again", run.reconciles, f.n)
	}

	// Nothing changes for a minute: no request at all (watches renewed
	// are counted apart).
	cnt.reset()
	time.Sleep(time.Minute) // the measurement's window, not a wait for the controller
	total, by := cnt.snapshot()
	t.Logf("a minute with nothing changing: %d mutating requests, %d reads (%d watches renewed)", total, cnt.reads.Load()-cnt.watches.Load(), cnt.watches.Load())
	if total != 0 || cnt.reads.Load()-cnt.watches.Load() != 0 {
		t.Errorf("a minute with nothing changing made %d mutating requests (%v) and %d reads", total, by, cnt.reads.Load()-cnt.watches.Load())
	}

	// A restart writes nothing.
	r.stop(t)
	restart := &counter{mutating: map[string]int{}}
	r2 := startWith(t, cfg, restart, ns, path, func(o *controller.Options) { o.ManageCRDs = true })
	defer r2.stop(t)
	r2.settle(t, 0, f.n)
	total, by = restart.snapshot()
	t.Logf("restart: %d Readers reconciled, %d mutating requests (%v)", f.n, total, by)
	if total != 0 {
		t.Errorf("a restart made %d mutating requests: %v", total, by)
	}

	// stencil diff reads live: the region edited while no controller
	// runs shows as exactly the children that print it.
	r2.stop(t)
	f.editDefaults(platform, "ap-south-1")()
	status, out := runDiff(t, path, ns, "-o", "json")
	var plan diffJSON
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("stencil diff -o json: exit %d: %v\n%s", status, err, out)
	}
	t.Logf("stencil diff after the region's edit: exit %d, %d updates, %d unchanged", status, plan.Summary.Update, plan.Summary.Unchanged)
	if status != 1 || plan.Summary.Update != f.n/2 || plan.Summary.Unchanged != f.n/2 {
		t.Errorf("stencil diff: exit %d, %d updates and %d unchanged, want exit 1, %d and %d", status, plan.Summary.Update, plan.Summary.Unchanged, f.n/2, f.n/2)
	}
}

// lookupChart looks a Secret up, as charts that keep a generated
// password do.
var lookupChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: lookup\nversion: 0.1.0\n",
	"values.yaml": "secretName: db\n",
	"templates/cm.yaml": `{{- $s := lookup "v1" "Secret" .Release.Namespace .Values.secretName }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-lookup
data:
  password: {{ if $s }}{{ index $s.data "password" | quote }}{{ else }}"none"{{ end }}
`,
}

// TestChartLookupReads: Helm's lookup in chart mode answers from the
// entry's declared reads. The same chart under an entry that declares the
// Secret finds it, and renders again when it changes; under one that
// does not, it finds nothing. Both converge and then write nothing
// (helm-operator's lookup upgrades forever).
func TestChartLookupReads(t *testing.T) {
	ctx := context.Background()
	cfg := restConfig(t)
	admin := dynamic.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("it-lookup-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	dir := t.TempDir()
	for name, text := range lookupChart {
		path := filepath.Join(dir, "chart", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(`resources:
  - {group: lookup.stencil.dev, version: v1, resource: lookers, kind: Looker, chart: chart, schema: {fromChart: true},
     reads: [{name: existing, apiVersion: v1, kind: Secret, objectName: db, secretData: true}]}
  - {group: lookup.stencil.dev, version: v1, resource: blinds, kind: Blind, chart: chart, schema: {fromChart: true}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	lookers := schema.GroupVersionResource{Group: "lookup.stencil.dev", Version: "v1", Resource: "lookers"}
	blinds := schema.GroupVersionResource{Group: "lookup.stencil.dev", Version: "v1", Resource: "blinds"}
	freshCRDs(ctx, t, admin, "lookers.lookup.stencil.dev", "blinds.lookup.stencil.dev")
	secretsNS := admin.Resource(secrets).Namespace(ns)
	if _, err := createOnce(ctx, secretsNS, object(secrets, "Secret", ns, "db", map[string]any{"data": map[string]any{"password": "Zmlyc3Q="}})); err != nil {
		t.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r := startWith(t, cfg, cnt, ns, path, func(o *controller.Options) { o.ManageCRDs = true })
	defer r.stop(t)
	poll(t, time.Minute, "the Looker and Blind CRDs, established", func() (bool, error) {
		_, err1 := admin.Resource(lookers).Namespace(ns).List(ctx, metav1.ListOptions{})
		_, err2 := admin.Resource(blinds).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil, nil
	})
	if _, err := createOnce(ctx, admin.Resource(lookers).Namespace(ns), cr(lookers, "Looker", ns, "l", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if _, err := createOnce(ctx, admin.Resource(blinds).Namespace(ns), cr(blinds, "Blind", ns, "b", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	want := func(name, value string) {
		t.Helper()
		poll(t, time.Minute, fmt.Sprintf("%s-lookup holding password %q", name, value), func() (bool, error) {
			c, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, name+"-lookup", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got, _, _ := unstructured.NestedString(c.Object, "data", "password")
			return got == value, nil
		})
	}
	want("l", "Zmlyc3Q=")
	want("b", "none")
	quiet(t, r, cnt, "a chart that looks a Secret up")
	t.Logf("lookup: the declared Secret found, the undeclared one not; 0 mutating requests in 15 s once converged")

	// The Secret changes: the Looker renders again; the Blind does not.
	s, err := secretsNS.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(s.Object, "c2Vjb25k", "data", "password")
	if _, err := secretsNS.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	want("l", "c2Vjb25k")
	t.Logf("lookup: the Looker's child followed the Secret's change in %s", time.Since(changed).Round(time.Millisecond))
	if n := cnt.writesTo("configmaps/b-lookup"); n != 0 {
		t.Errorf("the Blind's child was written %d times: it reads nothing", n)
	}
}

// BenchmarkReadFanOut: one platform ConfigMap read by STENCIL_BENCH_CRS
// Readers (default 1,000), half of which print its region, edited once;
// against a baseline measured in the same run, the same change to the
// same children made the way it is made without reads: by editing every
// Reader's spec (spec.regionOverride).
func BenchmarkReadFanOut(b *testing.B) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(b))
	suffix := time.Now().UnixNano() % 100000
	ns, platform := fmt.Sprintf("bench-fanout-%d", suffix), fmt.Sprintf("bench-fanout-platform-%d", suffix)
	newNamespace(ctx, b, admin, ns)
	newNamespace(ctx, b, admin, platform)
	defer deleteNamespace(ctx, b, admin, ns)
	if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(platform), object(configmaps, "ConfigMap", platform, "platform-defaults", map[string]any{"data": map[string]any{"region": "eu-west-1"}})); err != nil {
		b.Fatal(err)
	}
	if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(ns), object(secrets, "Secret", ns, "db", map[string]any{"data": map[string]any{"password": "eA=="}})); err != nil {
		b.Fatal(err)
	}
	cnt := &counter{mutating: map[string]int{}}
	r, _ := startReaders(ctx, b, cnt, ns, platform)
	defer r.stop(b)
	f := fanOut{t: b, ctx: ctx, admin: admin, ns: ns, n: benchCRs(b)}
	f.create()
	r.settle(b, r.counterValue(b, "stencil_reconcile_total"), 0)
	i := 0
	for b.Loop() {
		i++
		region := fmt.Sprintf("read-%d", i)
		read := f.measure(r, cnt, region, f.editDefaults(platform, region))
		override := fmt.Sprintf("spec-%d", i)
		spec := f.measure(r, cnt, override, func() {
			// Every Reader's spec, 16 at a time, as a platform team's
			// script or a GitOps sync would.
			ri := admin.Resource(readers).Namespace(ns)
			patch := []byte(fmt.Sprintf(`{"spec":{"regionOverride":%q}}`, override))
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for j := range f.n {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					if _, err := ri.Patch(ctx, fmt.Sprintf("r%04d", j), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		})
		// Back to the read for the next round.
		f.measure(r, cnt, region, func() {
			ri := admin.Resource(readers).Namespace(ns)
			for j := range f.n {
				if _, err := ri.Patch(ctx, fmt.Sprintf("r%04d", j), types.MergePatchType, []byte(`{"spec":{"regionOverride":null}}`), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The floor: what the writes the edit needs take at the client's
		// rate limit (restConfig's QPS), with nothing else in the way.
		qps := float64(restConfig(b).QPS)
		floor := time.Duration(float64(read.childWrites+read.by["PATCH readers/status"]) / qps * float64(time.Second))
		b.ReportMetric(read.took.Seconds()/floor.Seconds(), "x-floor-read")
		b.Logf("%d Readers, %d children printing the region:\n"+
			"  one edit of the ConfigMap they read: last child written after %s; %.0f reconciles, %.2f renders per Reader; %d child writes (%d children changed at the API server, %d others); %d mutating requests (%v)\n"+
			"  baseline, %d spec edits: last child written after %s; %.0f reconciles, %.2f renders per Reader; %d child writes (%d changed, %d others); %d mutating requests by stencil (%v)\n"+
			"  the read: %.2fx the baseline's time; %.2f mutating requests, %.2f renders and %.2f child writes per Reader; the floor, (%d child writes + %d status patches) / %.0f QPS = %s; the read %.2fx the floor",
			f.n, f.n/2, read.took.Round(time.Millisecond), read.reconciles, read.renders/float64(f.n), read.childWrites, read.regional, read.others, read.total, read.by,
			f.n, spec.took.Round(time.Millisecond), spec.reconciles, spec.renders/float64(f.n), spec.childWrites, spec.regional, spec.others, spec.total, spec.by,
			read.took.Seconds()/spec.took.Seconds(), float64(read.total)/float64(f.n), read.renders/float64(f.n), float64(read.childWrites)/float64(f.n),
			read.childWrites, read.by["PATCH readers/status"], qps, floor.Round(time.Millisecond), read.took.Seconds()/floor.Seconds())
		if read.renders != float64(f.n) {
			b.Errorf("the edit read by %d Readers made %.0f renders, want exactly one per Reader", f.n, read.renders)
		}
		b.ReportMetric(float64(f.n), "CRs")
		b.ReportMetric(read.took.Seconds(), "s-read")
		b.ReportMetric(spec.took.Seconds(), "s-spec-edits")
		b.ReportMetric(read.renders/float64(f.n), "renders/reader-read")
		b.ReportMetric(float64(read.total), "writes-read")
		b.ReportMetric(float64(spec.total), "writes-spec-edits")
	}
}
