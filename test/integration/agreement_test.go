//go:build integration

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/configtest"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/controller/offline"
	stencilreload "stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/templates"
)

// TestStencilTestAgreesWithController: for every case of the example
// configs, the case's resource and the objects its reads see are created
// on the plane, in a namespace of the case's own, and the controller
// converges on them. Then "stencil test"'s sync (package offline) runs
// over what the plane holds: the resource, its children and what it
// reads, as stored. It must agree with the controller on every point the
// controller decided: no child to write or prune, and the very status the
// controller wrote (patching none). And the first sync a case records
// (its resource, no children yet) records the events the controller
// recorded on the plane.
//
// A case whose resource the CRD refuses is refused by the plane's API
// server with the message the case expects.
func TestStencilTestAgreesWithController(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	installCRDs(ctx, t, admin)
	for _, ex := range []struct {
		path       string
		manageCRDs []string
	}{
		{path: filepath.Join(root, "crds", "stencil.yaml")},
		{path: filepath.Join(root, "crds", "reads", "stencil.yaml"), manageCRDs: []string{"sites.sites.example.com"}},
	} {
		t.Run(filepath.Base(filepath.Dir(ex.path)), func(t *testing.T) {
			if len(ex.manageCRDs) > 0 {
				freshCRDs(ctx, t, admin, ex.manageCRDs...)
			}
			conf, sets, err := stencilreload.Source{Path: ex.path}.Load()
			if err != nil {
				t.Fatal(err)
			}
			cases := loadCases(t, ex.path)
			kinds := map[schema.GroupVersionResource]string{}
			for _, c := range cases {
				res, _, _ := c.Objects()
				if set, err := templates.FindSet(ex.path, sets, res, c.Entry); err == nil {
					kinds[set.Resource().GVR()] = res.GetKind()
				}
			}
			cluster, err := offline.New(ctx, conf, sets, kinds)
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			r := startWith(t, cfg, &counter{mutating: map[string]int{}}, "", ex.path, func(o *controller.Options) { o.ManageCRDs = len(ex.manageCRDs) > 0 })
			defer r.stop(t)
			for _, res := range conf.Resources {
				poll(t, time.Minute, res.GVR().String()+" served", func() (bool, error) {
					_, err := admin.Resource(res.GVR()).List(ctx, metav1.ListOptions{Limit: 1})
					return err == nil, nil
				})
			}
			agreed := 0
			// A namespace of an earlier run may still be terminating.
			run := time.Now().Unix() % 100000
			for i, c := range cases {
				ns := fmt.Sprintf("agree-%s-%d-%d", strings.TrimSuffix(filepath.Base(filepath.Dir(ex.path)), "s"), run, i)
				if agreeOnCase(ctx, t, admin, kube, conf, sets, cluster, ns, c) {
					agreed++
				}
			}
			t.Logf("%s: %d of %d cases agree with the controller on the plane", ex.path, agreed, len(cases))
		})
	}
}

// loadCases loads every case of the config at path's tests.
func loadCases(t *testing.T, path string) []*configtest.Case {
	t.Helper()
	files, err := configtest.Find(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*configtest.Case
	for _, f := range files {
		tf, err := configtest.Load(f, path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tf.Cases...)
	}
	return out
}

// agreeOnCase runs one case on the plane in namespace ns and compares
// (TestStencilTestAgreesWithController); it reports whether the case
// converged and was compared.
func agreeOnCase(ctx context.Context, t *testing.T, admin dynamic.Interface, kube kubernetes.Interface, conf *config.Config,
	sets []*templates.Set, cluster *offline.Cluster, ns string, c *configtest.Case) bool {
	t.Helper()
	resource, _, reads := c.Objects()
	set, err := templates.FindSet(conf.Path, sets, resource, c.Entry)
	if err != nil {
		t.Fatalf("%s: %v", c.ID(), err)
	}
	gvr := set.Resource().GVR()
	home := resource.GetNamespace()
	newNamespace(ctx, t, admin, ns)
	// The case's objects in its namespace move to ns; the platform's
	// (another namespace) stay where the config reads them.
	var created []*unstructured.Unstructured
	for _, u := range reads {
		if u.GetKind() == resource.GetKind() && u.GetName() == resource.GetName() {
			// The resource itself, as a read of its own kind sees it.
			continue
		}
		if u.GetNamespace() == "" || u.GetNamespace() == home {
			u.SetNamespace(ns)
		} else {
			ensureNamespaces(ctx, t, admin, []*unstructured.Unstructured{u})
		}
		rgvr := readResource(t, conf, u)
		live, err := admin.Resource(rgvr).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "agreement", Force: true})
		if err != nil {
			t.Fatalf("%s: creating %s %s: %v", c.ID(), u.GetKind(), u.GetName(), err)
		}
		created = append(created, live)
		if live.GetNamespace() != ns {
			// The platform's object is this case's alone: the next case
			// must not read it.
			defer func() {
				ri := admin.Resource(rgvr).Namespace(live.GetNamespace())
				_ = ri.Delete(context.Background(), live.GetName(), metav1.DeleteOptions{})
				poll(t, time.Minute, live.GetName()+" deleted", func() (bool, error) {
					_, err := ri.Get(ctx, live.GetName(), metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				})
			}()
		}
	}
	resource.SetNamespace(ns)
	stored, err := admin.Resource(gvr).Namespace(ns).Create(ctx, resource, metav1.CreateOptions{})
	if c.Error != "" {
		if err == nil || !strings.Contains(err.Error(), c.Error) {
			t.Errorf("%s: the plane's API server should refuse the resource with %q; it answered %v", c.ID(), c.Error, err)
		}
		return true
	}
	if err != nil {
		t.Fatalf("%s: %v", c.ID(), err)
	}

	// The first sync: the events it records are the controller's.
	first, err := cluster.Sync(ctx, set, offline.Case{Resource: stored, Reads: liveReads(ctx, t, admin, conf, created, stored)})
	if err != nil {
		t.Fatalf("%s: %v", c.ID(), err)
	}
	poll(t, time.Minute, c.ID()+": the controller's events", func() (bool, error) {
		got, err := eventsOf(ctx, kube, stored)
		if err != nil {
			return false, err
		}
		for _, e := range first.Events {
			if !slices.Contains(got, e) {
				return false, nil
			}
		}
		return true, nil
	})

	// Converged: the offline sync over the plane's objects writes nothing.
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		live, err := admin.Resource(gvr).Namespace(ns).Get(ctx, stored.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		children := liveChildren(ctx, t, admin, set, live)
		rec, err := cluster.Sync(ctx, set, offline.Case{Resource: live, Observed: children, Reads: liveReads(ctx, t, admin, conf, created, live)})
		if err != nil {
			return false, err
		}
		if last = disagreement(live, rec); last != "" {
			return false, nil
		}
		st, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
		t.Logf("%s: agrees: %d children, %d events, status conditions %v", c.ID(), len(children), len(first.Events), reasons(st))
		return true, nil
	})
	if err != nil {
		t.Errorf("%s: stencil test's sync over the plane's objects disagrees with the controller: %v: %s", c.ID(), err, last)
		return false
	}
	return true
}

// ensureNamespaces creates the namespaces objs name that do not exist, and
// leaves them: the platform's namespace outlives a test.
func ensureNamespaces(ctx context.Context, t *testing.T, admin dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		if u.GetNamespace() == "" {
			continue
		}
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": u.GetNamespace()}}}
		if _, err := admin.Resource(namespaceGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// disagreement says where a sync over the plane's objects would write
// what the controller did not; "" when it writes nothing.
func disagreement(live *unstructured.Unstructured, rec *offline.Recording) string {
	var out []string
	for _, w := range rec.Written {
		out = append(out, "it would write "+w.GetKind()+"/"+w.GetName())
	}
	for _, p := range rec.Pruned {
		out = append(out, "it would prune "+p)
	}
	if rec.StatusPatched {
		out = append(out, fmt.Sprintf("its status differs from the controller's:\n  plane:   %v\n  offline: %v", live.Object["status"], rec.Status))
	}
	return strings.Join(out, "; ")
}

// reasons lists conditions as type=status/reason.
func reasons(conds []any) []string {
	var out []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"]))
	}
	return out
}

// readResource is the resource of an object a case's reads see.
func readResource(t *testing.T, conf *config.Config, u *unstructured.Unstructured) schema.GroupVersionResource {
	t.Helper()
	gvk := u.GroupVersionKind()
	for _, res := range conf.Resources {
		if res.Group == gvk.Group && res.Version == gvk.Version {
			return res.GVR()
		}
		if gvr, ok := res.ChildResource(gvk); ok {
			return gvr
		}
	}
	t.Fatalf("no resource known for %s", gvk)
	return schema.GroupVersionResource{}
}

// liveReads returns the read objects as the plane holds them, and the
// resource itself (a read of its own kind finds it too).
func liveReads(ctx context.Context, t *testing.T, admin dynamic.Interface, conf *config.Config, created []*unstructured.Unstructured, resource *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	out := []*unstructured.Unstructured{resource}
	for _, u := range created {
		live, err := admin.Resource(readResource(t, conf, u)).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, live)
	}
	return out
}

// liveChildren lists the children the controller wrote for resource, of
// every kind its entry renders.
func liveChildren(ctx context.Context, t *testing.T, admin dynamic.Interface, set *templates.Set, resource *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, gvk := range set.Kinds() {
		gvr, ok := set.Resource().ChildResource(gvk)
		if !ok {
			t.Fatalf("no resource known for child kind %s", gvk)
		}
		list, err := admin.Resource(gvr).Namespace(resource.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelOwnerUID + "=" + string(resource.GetUID())})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// eventsOf lists the events recorded on obj, each "Type Reason: message"
// as offline.Recording.Events.
func eventsOf(ctx context.Context, kube kubernetes.Interface, obj *unstructured.Unstructured) ([]string, error) {
	list, err := kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(obj.GetUID())})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out, nil
}
