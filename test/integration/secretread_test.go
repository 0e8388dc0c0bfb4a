//go:build integration

package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/controller"
)

// secretReadConfig: Peekers read a Secret the tenant names, without
// secretData, and print all of it they can (the read whole, its
// annotations); Charts do the same through Helm's lookup; Trusted read
// the same Secret with secretData.
const secretReadConfig = `resources:
  - group: leak.stencil.dev
    version: v1
    resource: peekers
    kind: Peeker
    schema:
      spec:
        secret: string
    templates: [peek.yaml.tmpl]
    children: [{apiVersion: v1, kind: ConfigMap}]
    reads:
      - {name: s, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.secret }}", required: true}
  - group: leak.stencil.dev
    version: v1
    resource: charts
    kind: Chart
    chart: chart
    schema: {fromChart: true}
    reads:
      - {name: s, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.secret }}", required: true}
  - group: leak.stencil.dev
    version: v1
    resource: trusted
    kind: Trusted
    schema:
      spec:
        secret: string
    templates: [peek.yaml.tmpl]
    children: [{apiVersion: v1, kind: ConfigMap}]
    reads:
      - {name: s, apiVersion: v1, kind: Secret, objectName: "{{ .Spec.secret }}", required: true, secretData: true}
`

var secretReadFiles = map[string]string{
	"peek.yaml.tmpl": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-peek
  annotations: {{ get (read "s").metadata "annotations" dict | toJson }}
data:
  whole: {{ read "s" | toYaml | quote }}
  password: {{ index (read "s").data "password" | quote }}
`,
	"chart/Chart.yaml":  "apiVersion: v2\nname: peek\nversion: 0.1.0\n",
	"chart/values.yaml": "secret: \"\"\n",
	"chart/templates/cm.yaml": `{{- $s := lookup "v1" "Secret" .Release.Namespace .Values.secret }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-peek
data:
  whole: {{ toYaml $s | quote }}
  password: {{ index ($s.data | default dict) "password" | quote }}
`,
}

// TestSecretReadShowsNoData: a Secret applied with kubectl apply (its
// last-applied annotation holds the manifest, password included) and one
// whose own annotation holds the password, read without secretData by
// own templates and by a chart's lookup that print all they can: no byte
// of the password, plain or base64, is in any child, status, event, the
// controller's log, or its read caches. Read with secretData, the same
// Secret still gives its data.
func TestSecretReadShowsNoData(t *testing.T) {
	ctx := context.Background()
	cfg := restConfig(t)
	admin := dynamic.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("it-secretread-%d", time.Now().UnixNano()%100000)
	newNamespace(ctx, t, admin, ns)
	// A password no fixture spells, so that finding it means it leaked.
	password := fmt.Sprintf("pw-%x", time.Now().UnixNano())
	encoded := base64.StdEncoding.EncodeToString([]byte(password))
	leaks := func(text string) bool { return strings.Contains(text, password) || strings.Contains(text, encoded) }

	dir := t.TempDir()
	files := map[string]string{"stencil.yaml": secretReadConfig}
	for k, v := range secretReadFiles {
		files[k] = v
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	applied := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied","namespace":%q},"stringData":{"password":%q}}`, ns, password)
	kubectl := exec.Command(filepath.Join(root, "bin", "kubectl"), "apply", "-f", "-")
	kubectl.Stdin = strings.NewReader(applied)
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, out)
	}
	s, err := admin.Resource(secrets).Namespace(ns).Get(ctx, "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !leaks(s.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]) {
		t.Fatalf("kubectl apply left no last-applied annotation with the password: %v", s.GetAnnotations())
	}
	annotated := object(secrets, "Secret", ns, "annotated", map[string]any{"data": map[string]any{"password": encoded}})
	annotated.SetAnnotations(map[string]string{"team.example.com/password-hint": password})
	if _, err := createOnce(ctx, admin.Resource(secrets).Namespace(ns), annotated); err != nil {
		t.Fatal(err)
	}

	group := "leak.stencil.dev"
	kinds := map[string]schema.GroupVersionResource{}
	var crds []string
	for kind, res := range map[string]string{"Peeker": "peekers", "Chart": "charts", "Trusted": "trusted"} {
		kinds[kind] = schema.GroupVersionResource{Group: group, Version: "v1", Resource: res}
		crds = append(crds, res+"."+group)
	}
	freshCRDs(ctx, t, admin, crds...)
	r := startLogged(t, cfg, &counter{mutating: map[string]int{}}, ns, filepath.Join(dir, "stencil.yaml"), func(o *controller.Options) { o.ManageCRDs = true }, true)
	defer r.stop(t)
	poll(t, time.Minute, "the CRDs served", func() (bool, error) {
		for _, g := range kinds {
			if _, err := admin.Resource(g).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	var names []string
	for _, kind := range []string{"Peeker", "Chart", "Trusted"} {
		for _, secret := range []string{"applied", "annotated"} {
			name := strings.ToLower(kind) + "-" + secret
			names = append(names, kind+"/"+name)
			if _, err := createOnce(ctx, admin.Resource(kinds[kind]).Namespace(ns), cr(kinds[kind], kind, ns, name, map[string]any{"secret": secret})); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range names {
		kind, name, _ := strings.Cut(n, "/")
		poll(t, time.Minute, n+" Ready", func() (bool, error) {
			u, err := admin.Resource(kinds[kind]).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && readyTrue(u), nil
		})
	}

	// What the tenant can read: children, statuses, events.
	looked := 0
	check := func(what string, u *unstructured.Unstructured) {
		t.Helper()
		b, _ := json.Marshal(u.Object)
		looked++
		if leaks(string(b)) {
			t.Errorf("%s holds the password: %s", what, b)
		}
	}
	for _, kind := range []string{"Peeker", "Chart"} {
		list, err := admin.Resource(kinds[kind]).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			check(kind+" "+list.Items[i].GetName()+" (its status)", &list.Items[i])
		}
	}
	for _, n := range []string{"peeker-applied", "peeker-annotated", "chart-applied", "chart-annotated"} {
		c, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, n+"-peek", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check("the child "+c.GetName(), c)
	}
	events, err := admin.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range events.Items {
		check("the event "+events.Items[i].GetName(), &events.Items[i])
	}
	// What stencil holds and says: its read caches and its log.
	cachedSecrets, fullSecrets := 0, 0
	r.c.ReadCache(func(u *unstructured.Unstructured, secretData bool) {
		if u.GetKind() != "Secret" {
			return
		}
		if secretData {
			fullSecrets++
			return
		}
		cachedSecrets++
		check("the read cache's "+u.GetName(), u)
	})
	if cachedSecrets == 0 {
		t.Error("no Secret in the read caches of the reads without secretData: nothing was checked there")
	}
	logs := r.logs.String()
	if len(logs) == 0 {
		t.Error("the controller logged nothing: nothing was checked there")
	}
	if leaks(logs) {
		t.Errorf("the controller's log holds the password")
	}
	// With secretData, the data is read.
	trusted, err := admin.Resource(configmaps).Namespace(ns).Get(ctx, "trusted-applied-peek", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(trusted.Object, "data", "password")
	t.Logf("a Secret applied with kubectl (last-applied holds the password) and one annotated with it, read without secretData by own templates and by a chart's lookup: %d objects (children, statuses, events, %d cached Secrets) and %d bytes of log checked, no password; with secretData the child holds %q (%d cached Secrets keep data)",
		looked, cachedSecrets, len(logs), got, fullSecrets)
	if got != encoded {
		t.Errorf("read with secretData, the child's password is %q, want the Secret's data %q", got, encoded)
	}
}
