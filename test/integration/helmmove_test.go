//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	helmkube "helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/controller"
	stencilreload "stencil.dev/stencil/controller/reload"
)

// The move from helm-operator, both ways, with Helm's own install and
// upgrade doing what helm-operator(-plugins) does for a custom resource:
// the chart installed as a release named after the resource, with the
// spec (and the watches file's overrideValues) as values, every object
// given the resource as controller (helm-operator's owner-reference
// post-renderer), the release Secret owned by the resource, the uninstall
// finalizer and the Deployed condition. helm-operator-plugins itself is
// not served by the module proxy this project builds from, so its
// binary cannot be built here; Helm v4's action package, client-side
// apply (what helm-operator's Helm 3 does), stands in for it.

// helmOperatorWatches is the watches file both controllers read.
const helmOperatorWatches = `- group: charts.example.com
  version: v1
  kind: Hello
  chart: %s
  overrideValues:
    podAnnotations.team: platform
`

// ownerRefs is helm-operator's post-renderer: every rendered object gets
// the custom resource as its controller.
type ownerRefs struct{ owner *unstructured.Unstructured }

// Run implements Helm's postrenderer.PostRenderer.
func (p ownerRefs) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	var out bytes.Buffer
	dec := utilyaml.NewYAMLOrJSONDecoder(in, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		t := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: p.owner.GetAPIVersion(), Kind: p.owner.GetKind(),
			Name: p.owner.GetName(), UID: p.owner.GetUID(), Controller: &t, BlockOwnerDeletion: &t}})
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return &out, nil
}

// helmOperator deploys hello as helm-operator would (upgrade: its
// reconcile of a release that exists): Helm's install or upgrade of the
// chart at chart, client-side apply, the finalizer, the owned release
// Secret and the Deployed condition.
func helmOperator(ctx context.Context, t *testing.T, admin dynamic.Interface, kube kubernetes.Interface, kubeconfig, ns, chart string, hello *unstructured.Unstructured, upgrade bool) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	values, _, _ := unstructured.NestedMap(hello.Object, "spec")
	values["podAnnotations"] = map[string]any{"team": "platform"}
	reason := "InstallSuccessful"
	if upgrade {
		up := action.NewUpgrade(cfg)
		up.Namespace, up.ServerSideApply, up.PostRenderer, up.WaitStrategy = ns, "false", ownerRefs{hello}, helmkube.HookOnlyStrategy
		if _, err := up.RunWithContext(ctx, hello.GetName(), ch, values); err != nil {
			t.Fatalf("helm upgrade %s (helm-operator's way back): %v", hello.GetName(), err)
		}
		reason = "UpgradeSuccessful"
	} else {
		in := action.NewInstall(cfg)
		in.Namespace, in.ReleaseName, in.ServerSideApply, in.PostRenderer, in.WaitStrategy = ns, hello.GetName(), false, ownerRefs{hello}, helmkube.HookOnlyStrategy
		if _, err := in.RunWithContext(ctx, ch, values); err != nil {
			t.Fatalf("helm install %s: %v", hello.GetName(), err)
		}
	}
	// helm-operator's release Secrets are owned by the resource.
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + hello.GetName()})
	if err != nil || len(secrets.Items) == 0 {
		t.Fatalf("the release Secrets of %s: %v (%d)", hello.GetName(), err, len(secrets.Items))
	}
	for _, s := range secrets.Items {
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}]}}`,
			hello.GetAPIVersion(), hello.GetKind(), hello.GetName(), hello.GetUID())
		if _, err := kube.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hellosNS := admin.Resource(hellos).Namespace(ns)
	if _, err := hellosNS.Patch(ctx, hello.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":["uninstall-helm-release"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	st := fmt.Sprintf(`{"status":{"conditions":[{"type":"Initialized","status":"True","reason":"","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},`+
		`{"type":"Deployed","status":"True","reason":%q,"message":"release was successfully installed","lastTransitionTime":"2026-01-01T00:00:00Z"}],"deployedRelease":{"name":%q}}}`,
		reason, hello.GetName())
	if _, err := hellosNS.Patch(ctx, hello.GetName(), types.MergePatchType, []byte(st), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// releaseObjects are what the chart makes for a Hello named name, by
// resource.
func releaseObjects(name string) map[string]string {
	return map[string]string{"deployments/" + name: "apps/v1", "services/" + name: "v1", "configmaps/" + name: "v1"}
}

// getObject reads "resource/name" of group-version gv in ns.
func getObject(ctx context.Context, admin dynamic.Interface, ns, object, gv string) (*unstructured.Unstructured, error) {
	resource, name, _ := strings.Cut(object, "/")
	group, version, ok := strings.Cut(gv, "/")
	if !ok {
		group, version = "", gv
	}
	return admin.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: resource}).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// uidsOf returns "resource/name=UID" of each object of the release of
// name, and of the Deployment's ReplicaSets (one per pod template: a new
// one is a rollout, its pods restarted).
func uidsOf(ctx context.Context, t *testing.T, admin dynamic.Interface, ns, name string) []string {
	t.Helper()
	var out []string
	for o, gv := range releaseObjects(name) {
		u, err := getObject(ctx, admin, ns, o, gv)
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		out = append(out, o+"="+string(u.GetUID()))
	}
	rss, err := admin.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range rss.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" && ref.Name == name {
			out = append(out, "replicasets/"+rs.GetName()+"="+string(rs.GetUID()))
		}
	}
	slices.Sort(out)
	return out
}

// TestHelmOperatorMoveBothWays: Hellos deployed by Helm as helm-operator
// deploys them are taken over by stencil, serving the same watches file,
// in place: the same UIDs and ReplicaSets (no pod template changed, so no
// pod restarted), at most one write per object, Deployed
// TakeoverSuccessful. One deleted after the move is gone with its objects
// and release Secrets, with nothing removed by hand (stencil releases
// helm-operator's finalizer). With stencil stopped, helm-operator's way
// back (an upgrade of the kept release) serves the same objects again:
// the same UIDs and ReplicaSets, managed by Helm.
func TestHelmOperatorMoveBothWays(t *testing.T) {
	cfg := restConfig(t)
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	kubeconfig := os.Getenv("KUBECONFIG")
	installCRDs(ctx, t, admin)
	ns := fmt.Sprintf("it-helmop-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	chart, err := filepath.Abs(filepath.Join(root, "crds", "charts", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	watches := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(watches, []byte(fmt.Sprintf(helmOperatorWatches, chart)), 0o644); err != nil {
		t.Fatal(err)
	}

	// helm-operator's releases of two Hellos.
	hellosNS := admin.Resource(hellos).Namespace(ns)
	before := map[string][]string{}
	for _, name := range []string{"legacy", "gone"} {
		u, err := createOnce(ctx, hellosNS, cr(hellos, "Hello", ns, name, map[string]any{"greeting": "hi from helm-operator"}))
		if err != nil {
			t.Fatal(err)
		}
		helmOperator(ctx, t, admin, kube, kubeconfig, ns, chart, u, false)
		poll(t, time.Minute, name+"'s ReplicaSet", func() (bool, error) {
			return len(uidsOf(ctx, t, admin, ns, name)) == 4, nil
		})
		before[name] = uidsOf(ctx, t, admin, ns, name)
	}
	t.Logf("helm-operator's objects: %v", before["legacy"])

	// stencil takes over, serving the same watches file.
	src := stencilreload.Source{Path: watches, Watches: true, Resolve: controller.DiscoveryResolver(discovery.NewDiscoveryClientForConfigOrDie(cfg))}
	cnt := &counter{mutating: map[string]int{}}
	r := startSource(t, cfg, cnt, ns, src, func(*controller.Options) {}, false)
	defer r.stop(t)
	for _, name := range []string{"legacy", "gone"} {
		poll(t, 2*time.Minute, name+" Ready and Deployed TakeoverSuccessful", func() (bool, error) {
			u, err := hellosNS.Get(ctx, name, metav1.GetOptions{})
			return err == nil && isReady(u) && conditionReason(u, "Deployed") == "TakeoverSuccessful", nil
		})
		if got := uidsOf(ctx, t, admin, ns, name); !slices.Equal(got, before[name]) {
			t.Errorf("%s taken over not in place:\n  before: %v\n  after:  %v", name, before[name], got)
		}
		for o := range releaseObjects(name) {
			if n := cnt.writesTo(o); n > 1 {
				t.Errorf("%s: %d writes, want at most 1", o, n)
			}
		}
	}
	t.Logf("taken over in place: the same UIDs and ReplicaSets; writes to legacy's objects: %d, %d, %d",
		cnt.writesTo("deployments/legacy"), cnt.writesTo("services/legacy"), cnt.writesTo("configmaps/legacy"))

	// Deleted after the move: gone with its objects and release Secrets.
	if err := hellosNS.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "hello/gone, its objects and release Secrets gone", func() (bool, error) {
		if _, err := hellosNS.Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=gone"})
		if err != nil || len(secrets.Items) > 0 {
			return false, err
		}
		for o, gv := range releaseObjects("gone") {
			if _, err := getObject(ctx, admin, ns, o, gv); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	r.stop(t)

	// The way back: helm-operator's next reconcile, an upgrade of the
	// release stencil kept.
	legacy, err := hellosNS.Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	helmOperator(ctx, t, admin, kube, kubeconfig, ns, chart, legacy, true)
	if got := uidsOf(ctx, t, admin, ns, "legacy"); !slices.Equal(got, before["legacy"]) {
		t.Errorf("the way back is not in place:\n  before: %v\n  after:  %v", before["legacy"], got)
	}
	d, err := admin.Resource(deployments).Namespace(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.GetLabels()["app.kubernetes.io/managed-by"]; got != "Helm" {
		t.Errorf("deployment/legacy managed-by %q after the way back, want Helm", got)
	}
	t.Logf("the way back: the same objects %v, managed-by Helm", before["legacy"])
}

// conditionReason returns the reason of u's condition of type typ.
func conditionReason(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}
