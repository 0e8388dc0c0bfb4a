package reconcile

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/reconcile/transform"
)

// A Deployment render with the values the API server normalises: numeric
// quantities, a false boolean, an empty string, a port without protocol.
const driftDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo
  namespace: ns
  labels: {app: demo, tier: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          args: [--port, "8080"]
          env:
            - {name: MODE, value: prod}
            - {name: EMPTY, value: ""}
          ports: [{containerPort: 8080}]
          resources:
            limits: {cpu: 1, memory: 64Mi}
            requests: {cpu: 0.5}
          securityContext: {readOnlyRootFilesystem: false}
`

const driftService = `
apiVersion: v1
kind: Service
metadata: {name: demo, namespace: ns}
spec:
  selector: {app: demo}
  ports: [{name: http, port: 80, targetPort: http}]
`

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	must(t, yaml.Unmarshal([]byte(doc), &u.Object))
	// Renders carry int64 numbers, as the templates package produces them.
	u.Object = toInt64(u.Object).(map[string]any)
	_, err := drift.StampHash(u)
	must(t, err)
	return u
}

func toInt64(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = toInt64(e)
		}
	case []any:
		for i, e := range t {
			t[i] = toInt64(e)
		}
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	}
	return v
}

func container(u *unstructured.Unstructured) map[string]any {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	return cs[0].(map[string]any)
}

func setContainer(t *testing.T, u *unstructured.Unstructured, c map[string]any) {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	cs[0] = c
	must(t, unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"))
}

func TestDetectDrift(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		edit    func(*testing.T, *unstructured.Unstructured) // by kubectl-edit; nil: none
		change  func(*unstructured.Unstructured)             // to the render; nil: none
		want    drift.Kind
		manager string
	}{
		{name: "normalised values are not drift", doc: driftDeployment, want: drift.InSync},
		{name: "defaulted service port protocol is not drift", doc: driftService, want: drift.InSync},
		{name: "a field the template does not set", doc: driftDeployment, want: drift.InSync,
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				must(t, unstructured.SetNestedField(u.Object, int64(5), "spec", "minReadySeconds"))
			}},
		{name: "an env element another manager adds stays theirs", doc: driftDeployment, want: drift.InSync,
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				c["env"] = append(c["env"].([]any), map[string]any{"name": "SIDECAR", "value": "x"})
				setContainer(t, u, c)
			}},
		{name: "a scalar changed by hand", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				c["image"] = "evil:latest"
				setContainer(t, u, c)
			}},
		{name: "a quantity changed by hand", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				must(t, unstructured.SetNestedField(c, "2", "resources", "limits", "cpu"))
				setContainer(t, u, c)
			}},
		{name: "an element appended to an atomic list", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				c["args"] = append(c["args"].([]any), "--debug")
				setContainer(t, u, c)
			}},
		{name: "a merge-list element changed", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				c["env"].([]any)[0].(map[string]any)["value"] = "debug"
				setContainer(t, u, c)
			}},
		{name: "a label changed", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				labels := u.GetLabels()
				labels["tier"] = "db"
				u.SetLabels(labels)
			}},
		{name: "a field removed by hand", doc: driftDeployment, want: drift.Unowned,
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				c := container(u)
				delete(c, "args")
				setContainer(t, u, c)
			}},
		{name: "the applied hash stripped", doc: driftDeployment, want: drift.Unowned,
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetAnnotations(nil)
			}},
		{name: "the applied hash rewritten", doc: driftDeployment, want: drift.TakenOver, manager: "kubectl-edit",
			edit: func(t *testing.T, u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{contract.AnnotationAppliedHash: "0000"})
			}},
		{name: "the template output changed", doc: driftDeployment, want: drift.TemplateChanged,
			change: func(u *unstructured.Unstructured) {
				must(t, unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas"))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := parse(t, tt.doc)
			live := serverApply(t, nil, want)
			if tt.edit != nil {
				live = serverUpdate(t, live, "kubectl-edit", func(u *unstructured.Unstructured) { tt.edit(t, u) })
			}
			if tt.change != nil {
				tt.change(want)
				_, err := drift.StampHash(want)
				must(t, err)
			}
			// The verdict is the same on the object as the server sends it
			// and as the child cache keeps it (field sets as JSON text).
			cached, err := transform.Lean(live.DeepCopy())
			must(t, err)
			if _, isText := cached.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)["fieldsV1"].(string); !isText {
				t.Fatal("transform.Lean left the field sets as trees")
			}
			for form, obj := range map[string]*unstructured.Unstructured{"as sent": live, "as cached": cached.(*unstructured.Unstructured)} {
				got := drift.Detect(obj, want, want.GetAnnotations()[contract.AnnotationAppliedHash])
				if got.Kind != tt.want || got.Manager != tt.manager {
					t.Errorf("%s: drift.Detect = %s (field %q, manager %q), want %s (manager %q); managers %v",
						form, got.Kind, got.Path, got.Manager, tt.want, tt.manager, managersOf(live))
				}
			}
		})
	}
}

// TestDeletedChildIsForgottenByTheDryRunMemo: a deleted child's dry run is
// never asked again, so the memo stays bounded by the children that exist.
func TestDeletedChildIsForgottenByTheDryRunMemo(t *testing.T) {
	c := New(Options{})
	child := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "uid-svc"}}}
	c.memory.DryRuns.Set(child.GetUID(), "1/hash")
	c.Gone(child)
	if c.memory.DryRuns.Has(child.GetUID(), "1/hash") || c.memory.DryRuns.Len() != 0 {
		t.Error("the dry-run memo still holds the deleted child")
	}
}
