package reads

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

var (
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	sitesGVR   = schema.GroupVersionResource{Group: "sites.example.com", Version: "v1", Resource: "sites"}
)

func obj(apiVersion, kind, ns, name string, labels map[string]any, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// queue records what the watcher enqueues.
type queue struct {
	mu   sync.Mutex
	keys []string
}

func (q *queue) add(r Reader) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.keys = append(q.keys, r.Name)
}

func (q *queue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.keys
	q.keys = nil
	slices.Sort(out)
	return slices.Compact(out)
}

// eventually waits for the queue to hold want; nothing else may come.
func (q *queue) eventually(t *testing.T, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for len(want) > 0 && time.Now().Before(deadline) {
		q.mu.Lock()
		n := len(q.keys)
		q.mu.Unlock()
		if n >= len(want) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(want) == 0 {
		// Nothing must come: give the informer time to deliver one.
		time.Sleep(200 * time.Millisecond)
	}
	got = q.take()
	if !slices.Equal(got, want) {
		t.Errorf("%s: queued %v, want %v", what, got, want)
	}
}

// TestWatcherQueuesExactlyTheReaders: the readers of an object (by name,
// also before it exists) and of a selector are queued when it changes in
// what a read sees, and nobody when only its status (of a kind stencil
// serves) or nothing a read sees changes; a Secret's data never enters the
// cache of a scope without secretData.
func TestWatcherQueuesExactlyTheReaders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList", sitesGVR: "SiteList"},
		obj("v1", "Secret", "team-a", "db", nil, map[string]any{"data": map[string]any{"password": "c2VjcmV0"}}),
		obj("sites.example.com/v1", "Site", "team-a", "blog", map[string]any{"tier": "web"}, nil))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "sites.example.com", Version: "v1", Kind: "Site"}, meta.RESTScopeNamespace)
	q := &queue{}
	w := New(ctx, Options{Dynamic: dyn, Mapper: mapper, Enqueue: q.add,
		Served: func(gk schema.GroupKind) bool { return gk.Kind == "Site" }})

	// Two readers: shop names the Secret db, and reads its tier's Sites.
	reads := []config.Read{
		{Name: "password", APIVersion: "v1", Kind: "Secret", ObjectName: "{{ .Spec.passwordSecret }}"},
		{Name: "peers", APIVersion: "sites.example.com/v1", Kind: "Site", Selector: &config.ReadSelector{MatchLabels: map[string]string{"tier": "{{ .Spec.tier }}"}}},
	}
	src := w.Source(ctx)
	u, err := src.Get(reads[0], "team-a", "db")
	if err != nil || u == nil {
		t.Fatalf("Get db: %v, %v", u, err)
	}
	if d, _, _ := unstructured.NestedStringMap(u.Object, "data"); d["password"] != "" {
		t.Errorf("a Secret's data entered the cache of a read without secretData: %v", d)
	}
	peers, err := src.List(reads[1], "team-a", mustSelector(t, "tier=web"))
	if err != nil || len(peers) != 1 {
		t.Fatalf("List peers: %v, %v", peers, err)
	}
	track := func(name, secret string) {
		w.Track(Reader{GVR: sitesGVR, NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}, targets(t, reads, "team-a", secret))
	}
	track("shop", "db")
	track("news", "missing")
	q.take()

	secrets := dyn.Resource(secretsGVR).Namespace("team-a")
	sites := dyn.Resource(sitesGVR).Namespace("team-a")
	// The Secret's data changes: its reader, not the other.
	s := obj("v1", "Secret", "team-a", "db", nil, map[string]any{"data": map[string]any{"password": "bmV3"}})
	s.SetResourceVersion("2")
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "the Secret shop reads changed")
	// (Its data is blanked in the cache: to a read without secretData the
	// change is invisible, and nobody is queued.)
	s.Object["data"] = map[string]any{"password": "bmV3", "user": "eA=="}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a key added to the Secret shop reads", "shop")
	// A Secret that does not exist yet is created: its reader.
	if _, err := secrets.Create(ctx, obj("v1", "Secret", "team-a", "missing", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "the Secret news waits for, created", "news")
	// A Site of the tier: both read the tier's Sites.
	if _, err := sites.Create(ctx, obj("sites.example.com/v1", "Site", "team-a", "wiki", map[string]any{"tier": "web"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a Site of the tier created", "news", "shop")
	// Its status changes (stencil's own output): nobody.
	wiki, _ := sites.Get(ctx, "wiki", metav1.GetOptions{})
	wiki.Object["status"] = map[string]any{"phase": "Ready"}
	wiki.SetResourceVersion("9")
	if _, err := sites.Update(ctx, wiki, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a status change of a served kind")
	// Its label moves it out of the tier: both, once more.
	wiki.SetLabels(map[string]string{"tier": "batch"})
	if _, err := sites.Update(ctx, wiki, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a Site leaving the tier", "news", "shop")
	// A Site of another tier: nobody.
	if _, err := sites.Create(ctx, obj("sites.example.com/v1", "Site", "team-a", "jobs", map[string]any{"tier": "batch"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a Site of another tier")
	// shop is deleted: forgotten, the Secret it read wakes nobody.
	w.Forget(Reader{GVR: sitesGVR, NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "shop"}})
	if err := secrets.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "the Secret a forgotten reader read, deleted")
	if n := w.Readers(); n != 1 {
		t.Errorf("%d readers indexed, want 1", n)
	}
	// news's entry leaves the config: forgotten too.
	w.Retain(func(r Reader) bool { return r.GVR != sitesGVR })
	if n := w.Readers(); n != 0 {
		t.Errorf("%d readers indexed once their entry left the config, want 0", n)
	}
	if _, err := sites.Create(ctx, obj("sites.example.com/v1", "Site", "team-a", "docs", map[string]any{"tier": "web"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q.eventually(t, "a Site of the tier, once nobody reads it")
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// targets are what a render of a Site naming secret, of tier web, in ns
// looked for.
func targets(t *testing.T, reads []config.Read, ns, secret string) []templates.ReadTarget {
	return []templates.ReadTarget{
		{Read: reads[0], Namespace: ns, Name: secret},
		{Read: reads[1], Namespace: ns, Selector: mustSelector(t, "tier=web")},
	}
}

// TestWatchesFollowTheReaders: every watch is of one namespace, and only
// of namespaces that hold a reader of its kind; a read with a fixed name
// watches that object by name; a scope stops once no reader is indexed
// under it for Idle, and a ring member (Hold) keeps only its namespaces'
// readers.
func TestWatchesFollowTheReaders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := runtime.NewScheme()
	configmapsGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList", sitesGVR: "SiteList", configmapsGVR: "ConfigMapList"},
		obj("v1", "ConfigMap", "platform", "defaults", nil, nil),
		obj("v1", "Secret", "team-a", "db", nil, nil),
		obj("v1", "Secret", "team-c", "db", nil, nil),
		obj("sites.example.com/v1", "Site", "team-a", "blog", map[string]any{"tier": "web"}, nil))
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"Secret", "ConfigMap"} {
		mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: k}, meta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Group: "sites.example.com", Version: "v1", Kind: "Site"}, meta.RESTScopeNamespace)
	w := New(ctx, Options{Dynamic: dyn, Mapper: mapper, Idle: time.Minute})

	reads := []config.Read{
		{Name: "defaults", APIVersion: "v1", Kind: "ConfigMap", ObjectName: "defaults", Namespace: "platform"},
		{Name: "tls", APIVersion: "v1", Kind: "Secret", ObjectName: "tls"},
		{Name: "password", APIVersion: "v1", Kind: "Secret", ObjectName: "{{ .Spec.passwordSecret }}"},
		{Name: "peers", APIVersion: "sites.example.com/v1", Kind: "Site", Selector: &config.ReadSelector{MatchLabels: map[string]string{"tier": "{{ .Spec.tier }}"}}},
	}
	// render is a sync of the Site ns/name: it resolves its reads, then
	// is indexed under what it looked for.
	render := func(ns, name string) {
		t.Helper()
		src := w.Source(ctx)
		for _, rd := range reads[:3] {
			at, objName := ns, rd.ObjectName
			if rd.Namespace != "" {
				at = rd.Namespace
			}
			if rd.Name == "password" {
				objName = "db"
			}
			if _, err := src.Get(rd, at, objName); err != nil {
				t.Fatal(err)
			}
		}
		sel := mustSelector(t, "tier=web")
		if _, err := src.List(reads[3], ns, sel); err != nil {
			t.Fatal(err)
		}
		w.Track(Reader{GVR: sitesGVR, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, []templates.ReadTarget{
			{Read: reads[0], Namespace: "platform", Name: "defaults"},
			{Read: reads[1], Namespace: ns, Name: "tls"},
			{Read: reads[2], Namespace: ns, Name: "db"},
			{Read: reads[3], Namespace: ns, Selector: sel},
		})
	}
	render("team-a", "shop")
	render("team-a", "news")
	render("team-c", "wiki")
	want := []string{
		"configmaps platform/defaults",
		"secrets team-a/tls", "secrets team-c/tls",
		"secrets in namespace team-a", "secrets in namespace team-c",
		"sites.sites.example.com in namespace team-a", "sites.sites.example.com in namespace team-c",
	}
	slices.Sort(want)
	if got := w.Scopes(); !slices.Equal(got, want) {
		t.Errorf("watched %q, want %q", got, want)
	}
	for _, a := range dyn.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch") && a.GetNamespace() == "" {
			t.Errorf("a cluster-wide %s of %s", a.GetVerb(), a.GetResource())
		}
	}

	// team-c's one reader is deleted: its scopes stop once idle, not
	// before; team-a's stay.
	w.Forget(Reader{GVR: sitesGVR, NamespacedName: types.NamespacedName{Namespace: "team-c", Name: "wiki"}})
	w.sweep(time.Now())
	if got := w.Scopes(); len(got) != len(want) {
		t.Errorf("scopes stopped before they were idle: %q", got)
	}
	w.sweep(time.Now().Add(time.Minute))
	want = []string{"configmaps platform/defaults", "secrets team-a/tls", "secrets in namespace team-a", "sites.sites.example.com in namespace team-a"}
	slices.Sort(want)
	if got := w.Scopes(); !slices.Equal(got, want) {
		t.Errorf("after team-c's last reader left, watched %q, want %q", got, want)
	}

	// A ring member that holds team-c only drops team-a's readers, and
	// their watches.
	w.Hold(func(ns string) bool { return ns == "team-c" })
	w.sweep(time.Now().Add(time.Minute))
	if got := w.Scopes(); len(got) != 0 || w.Readers() != 0 {
		t.Errorf("a member holding team-c only: %d readers, watches %q", w.Readers(), got)
	}
	render("team-c", "wiki")
	if got := w.Scopes(); len(got) != 4 {
		t.Errorf("a reader of team-c back: watches %q, want its 4", got)
	}
}
