package registry

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"stencil.dev/stencil/contract"
)

// deployment is a child stencil wrote: it carries the label the child
// informers filter on.
func deployment(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "1",
			"labels": map[string]any{contract.LabelManagedBy: contract.ManagedByValue}},
	}}
}

// TestRegistryReshardKeepsOnlyTheShare: a ring member's informers hold
// only its share's custom resources and children (the fake API, like a
// server without sharded list and watch, ignores the shard selector: the
// registry filters the streams itself), and a new share swaps every
// informer for one of that share.
func TestRegistryReshardKeepsOnlyTheShare(t *testing.T) {
	cfg, sets := testConfig(t, entries{})
	h := startRegistry(t, cfg, sets, crdObject("webapps", "apps.example.com", "WebApp", "v1beta1"),
		webapp("east", "e"), webapp("west", "w"), deployment("east", "e"), deployment("west", "w"))

	cached := func() (parents, children []string) {
		for _, k := range h.reg.Keys(webappGVR) {
			parents = append(parents, k.Namespace)
		}
		for _, inf := range h.reg.Child(deploymentGVK).Informers {
			for _, obj := range inf.GetStore().List() {
				children = append(children, obj.(metav1.Object).GetNamespace())
			}
		}
		slices.Sort(parents)
		slices.Sort(children)
		return parents, children
	}
	if parents, children := cached(); len(parents) != 2 || len(children) != 2 {
		t.Fatalf("before any share: cached WebApps in %v, Deployments in %v; want both", parents, children)
	}
	for _, share := range []string{"east", "west"} {
		must(t, h.reg.Reshard(h.ctx, &Shard{Holds: func(ns string) bool { return ns == share }}))
		parents, children := cached()
		if !slices.Equal(parents, []string{share}) || !slices.Equal(children, []string{share}) {
			t.Fatalf("share %s: cached WebApps in %v, Deployments in %v; want only %s", share, parents, children, share)
		}
	}
	must(t, h.reg.Reshard(h.ctx, &Shard{Holds: func(string) bool { return true }}))
	if parents, children := cached(); len(parents) != 2 || len(children) != 2 {
		t.Fatalf("whole share: cached WebApps in %v, Deployments in %v; want both", parents, children)
	}
}

// TestShareListKeepsOnlyTheShare: a server that ignores the shard selector
// sends every namespace; the list of either kind of informer (objects,
// names) keeps only the share's.
func TestShareListKeepsOnlyTheShare(t *testing.T) {
	s := &Shard{Holds: func(ns string) bool { return ns == "a" }}
	for _, l := range []runtime.Object{
		&unstructured.UnstructuredList{Items: []unstructured.Unstructured{{Object: map[string]any{"metadata": map[string]any{"namespace": "a", "name": "1"}}}, {Object: map[string]any{"metadata": map[string]any{"namespace": "b", "name": "2"}}}}},
		&metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "1"}}, {ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "2"}}}},
	} {
		lw := shareListWatch(s, func(*metav1.ListOptions) {}, func(context.Context, metav1.ListOptions) (runtime.Object, error) { return l, nil }, nil)
		out, err := lw.ListWithContextFunc(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch o := out.(type) {
		case *unstructured.UnstructuredList:
			if len(o.Items) != 1 || o.Items[0].GetName() != "1" {
				t.Fatalf("kept %+v, want only a/1", o.Items)
			}
		case *metav1.PartialObjectMetadataList:
			if len(o.Items) != 1 || o.Items[0].Name != "1" {
				t.Fatalf("kept %+v, want only a/1", o.Items)
			}
		}
	}
}
