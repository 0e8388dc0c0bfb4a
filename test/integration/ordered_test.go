//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestMapOrderConvergesAcrossReplicas: a template that prints a tenant's
// 10-key map with keys, values and range converges, then writes nothing
// over 3 resync periods while two replicas of the stencil binary (leader
// election) are restarted one after the other: each process, with its own
// map seeds, renders the same bytes. Writes are counted at the API
// server: the resourceVersions of every resource and child.
func TestMapOrderConvergesAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	ns := fmt.Sprintf("it-maporder-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	gvr := schema.GroupVersionResource{Group: "maporder.stencil.dev", Version: "v1", Resource: "labelled"}
	crd := "labelled.maporder.stencil.dev"
	dir := t.TempDir()
	files := map[string]string{
		"stencil.yaml": `resources:
  - group: maporder.stencil.dev
    version: v1
    resource: labelled
    kind: Labelled
    schema:
      spec:
        labels: "map[string]string"
    templates: [cm.yaml.tmpl]
    children: [{apiVersion: v1, kind: ConfigMap}]
`,
		"cm.yaml.tmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}
  labels:
    {{- range $k, $v := .Spec.labels }}
    {{ $k }}: {{ $v | quote }}
    {{- end }}
data:
  keys: {{ keys .Spec.labels | join "," | quote }}
  values: {{ values .Spec.labels | join "," | quote }}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = admin.Resource(crdsGVR).Delete(context.Background(), crd, metav1.DeleteOptions{}) })
	bin := filepath.Join(root, "bin", "stencil")
	replica := func(name string) *process {
		return startProcessArgs(t, name, bin, "--config", filepath.Join(dir, "stencil.yaml"), "--namespace", ns,
			"--manage-crds", "--leader-elect", "--leader-elect-namespace", ns, "--resync", "3s",
			"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s")
	}
	a, b := replica(ns+"-a"), replica(ns+"-b")
	defer func() { a.stop(t); b.stop(t) }()
	poll(t, time.Minute, "the Labelled CRD served", func() (bool, error) {
		_, err := admin.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	labels := map[string]any{}
	for i := range 10 {
		labels[fmt.Sprintf("tenant.example.com/key-%d", (i*7)%10)] = fmt.Sprintf("v%d", i)
	}
	const n = 5
	for i := range n {
		if _, err := createOnce(ctx, admin.Resource(gvr).Namespace(ns), cr(gvr, "Labelled", ns, fmt.Sprintf("l%d", i), map[string]any{"labels": labels})); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 2*time.Minute, fmt.Sprintf("%d Labelled Ready", n), func() (bool, error) {
		for i := range n {
			u, err := admin.Resource(gvr).Namespace(ns).Get(ctx, fmt.Sprintf("l%d", i), metav1.GetOptions{})
			if err != nil || !readyTrue(u) {
				return false, nil
			}
		}
		return true, nil
	})
	versions := func() string {
		var out []string
		for _, r := range []schema.GroupVersionResource{gvr, configmaps} {
			list, err := admin.Resource(r).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range list.Items {
				if u.GetName() == "kube-root-ca.crt" {
					continue
				}
				out = append(out, u.GetKind()+"/"+u.GetName()+"@"+u.GetResourceVersion())
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	cm, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "l0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converged: configmap/l0 keys = %v", cm.Object["data"])
	converged := versions()
	// 3 resync periods (the measurement's window, not a wait for the
	// controller), then each replica restarted in turn, 3 more each.
	time.Sleep(3 * 3 * time.Second)
	if got := versions(); got != converged {
		t.Errorf("3 resyncs wrote:\nbefore %s\nafter  %s", converged, got)
	}
	for _, which := range []string{"a", "b"} {
		if which == "a" {
			a.stop(t)
			a = replica(ns + "-a2")
		} else {
			b.stop(t)
			b = replica(ns + "-b2")
		}
		time.Sleep(3 * 3 * time.Second)
		if got := versions(); got != converged {
			t.Errorf("after replica %s restarted and 3 resyncs:\nbefore %s\nafter  %s", which, converged, got)
		}
	}
	t.Logf("%d resources and %d children, a 10-key map printed by keys, values and range: 0 writes over 3 resyncs, and over 3 more after each of 2 replicas restarted in turn", n, n)
	if _, err := admin.Resource(crdsGVR).Get(ctx, crd, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("the CRD is gone")
	}
}
