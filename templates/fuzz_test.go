package templates

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// FuzzRender renders arbitrary specs and names through the example
// templates. Rendering must never panic; every failure must be a engine.RenderError
// (terminal, reported in status); every success must honour the child contract.
func FuzzRender(f *testing.F) {
	for _, seed := range []struct{ name, spec string }{
		{"demo", `{"image":"registry.k8s.io/pause:3.10","replicas":2,"port":8080}`},
		{"cache", `{"size":1}`},
		{"demo", `{}`},
		{"demo", `{"image":"","replicas":"two","port":1.5}`},
		{"demo", `{"image":{"a":[1,2]},"replicas":-1,"port":"8080","serviceType":"NodePort"}`},
		{"demo", `{"image":"x\ny: z","size":1e300,"serviceType":null}`},
		{"demo", `{"image":"'\"{{ .Name }}\"'","replicas":9223372036854775807}`},
		{"Bad.Name", `{"image":"x"}`},
		{"a-very-long-name-that-is-longer-than-sixty-three-characters-for-sure", `{"image":"x"}`},
		{"", `{"image":"x"}`},
		{"true", `{"image":"null","serviceType":"- a"}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	sets := exampleSets(f)
	f.Fuzz(func(t *testing.T, name string, specJSON []byte) {
		var spec map[string]any
		if err := json.Unmarshal(specJSON, &spec); err != nil {
			return
		}
		for _, s := range sets {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": s.Resource().Group + "/" + s.Resource().Version,
				"kind":       "Fuzz",
				"metadata":   map[string]any{"name": name, "namespace": "ns", "uid": "u-1", "generation": int64(1)},
				"spec":       spec,
			}}
			parent, err := view.NewObject(u, s.Resource().GVR())
			if err != nil {
				t.Fatalf("NewObject: %v", err)
			}
			children, err := s.Render(parent)
			if err != nil {
				checkRenderErrors(t, err)
			}
			for _, c := range children {
				if c.GetNamespace() != "ns" {
					t.Fatalf("child %s in namespace %q", c.GetName(), c.GetNamespace())
				}
				refs := c.GetOwnerReferences()
				if len(refs) != 1 || refs[0].UID != "u-1" || refs[0].Controller == nil || !*refs[0].Controller {
					t.Fatalf("child %s ownerReferences %v", c.GetName(), refs)
				}
				if l := c.GetLabels(); l[contract.LabelManagedBy] != contract.ManagedByValue || l[contract.LabelOwnerUID] != "u-1" {
					t.Fatalf("child %s labels %v", c.GetName(), l)
				}
				if !slices.Contains(s.Kinds(), c.GroupVersionKind()) {
					t.Fatalf("child kind %v not allowed", c.GroupVersionKind())
				}
				_ = runtime.DeepCopyJSON(c.Object)
			}
			if _, err := s.RenderStatus(parent); err != nil {
				checkRenderErrors(t, err)
			}
		}
	})
}

// checkRenderErrors fails unless err and every error joined into it is a *engine.RenderError.
func checkRenderErrors(t *testing.T, err error) {
	t.Helper()
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			checkRenderErrors(t, e)
		}
		return
	}
	var re *engine.RenderError
	if !errors.As(err, &re) {
		t.Fatalf("error is not a engine.RenderError: %v", err)
	}
}

// FuzzOutput feeds arbitrary template output to the document splitter and
// the child decoder, the part of rendering a template author controls
// completely: no panic, and an accepted child honours the contract.
func FuzzOutput(f *testing.F) {
	for _, seed := range []string{
		deployment,
		"---\n" + deployment + "---\n# c\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: team-a}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: other, labels: {a: [1]}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: s, ownerReferences: 5, labels: null}\n",
		"a: &a [*a, *a]\n",
		"--- # x\n...\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: 1e3\n",
		"{apiVersion: v1, kind: Service, metadata: {name: x}, spec: {n: 99999999999999999999999}}",
	} {
		f.Add([]byte(seed))
	}
	s := &Set{kinds: DefaultKinds}
	f.Fuzz(func(t *testing.T, out []byte) {
		p := parent()
		docs, err := splitDocuments(out)
		if err != nil {
			return
		}
		for _, doc := range docs {
			u, err := s.childText(doc.body, p)
			if err != nil {
				continue
			}
			if u.GetNamespace() != p.Namespace || u.GetName() == "" || len(u.GetOwnerReferences()) != 1 {
				t.Fatalf("accepted child %v", u.Object)
			}
			_ = runtime.DeepCopyJSON(u.Object)
		}
	})
}
