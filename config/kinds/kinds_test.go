package kinds

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestTableIsConsistent holds the table to what its users assume: a kind
// with a namespaced resource is not cluster-scoped, every resource is a
// lowercase plural, and a kind that grants permissions has a resource
// ("stencil rbac" names it).
func TestTableIsConsistent(t *testing.T) {
	for gk, res := range builtinResources {
		if IsClusterScoped(gk) {
			t.Errorf("%s is in the namespaced table and cluster-scoped", gk)
		}
		if res == "" || strings.ToLower(res) != res {
			t.Errorf("%s: resource %q is not a lowercase plural", gk, res)
		}
	}
	for gk := range grantsPermissions {
		if _, ok := Resource(gk); !ok {
			t.Errorf("%s grants permissions and has no resource in the table", gk)
		}
	}
	if res, ok := Resource(schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}); !ok || res != "ingresses" {
		t.Errorf("Resource(Ingress) = %q, %v; want ingresses, true", res, ok)
	}
	if _, ok := Resource(schema.GroupKind{Group: "example.com", Kind: "Widget"}); ok {
		t.Error("Resource(Widget.example.com) found a resource: a kind outside the table is never guessed")
	}
}
