package access

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/install"
)

// What a reload asks for is what install.Grants gives the new config:
// child kinds, read kinds (by name where a read is fixed), the configured
// resources, their status and finalizers, events, the CRDs and, with
// --manage-crds, the CRDs it writes.

// single is one verb on one resource (or all of its objects, name ""), in
// one namespace (or all, "").
type single struct {
	group, resource, namespace, name, verb string
}

// singles expands stencil's own grants into single accesses: what an
// identity holds (install.IdentityRoles) is the platform's to bind, not
// stencil's to have.
func singles(grants []install.Grant) []single {
	var out []single
	for _, g := range install.Own(grants) {
		names := g.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, ns := range g.Namespaces {
			for _, name := range names {
				for _, verb := range g.Verbs {
					out = append(out, single{group: g.Group, resource: g.Resource, namespace: ns, name: name, verb: verb})
				}
			}
		}
	}
	return out
}

// Needs lists what stencil needs for next and did not need for running,
// both derived by install.Grants with o (Beyond). Only what is new is
// asked, as a reload starts only what is new: what the running config
// needs was there when it started.
func Needs(o install.RoleOptions, running, next []*entry.Entry) ([]Need, error) {
	want, err := install.Grants(next, o)
	if err != nil {
		return nil, fmt.Errorf("deriving what the new config needs: %w", err)
	}
	// A running config's grants that cannot be derived whole only make the
	// check ask more.
	had, _ := install.Grants(running, o)
	return Beyond(want, had), nil
}

// Beyond lists the accesses of want that had does not cover: one need per
// resource, namespace and object, its verbs in a rule's order, sorted. had
// covers an access when it holds that verb on that resource in that
// namespace or in every namespace, on that object or on all.
func Beyond(want, had []install.Grant) []Need {
	have := map[single]bool{}
	for _, a := range singles(had) {
		have[a] = true
	}
	type key struct{ group, resource, namespace, name string }
	verbs := map[key]map[string]bool{}
	for _, a := range singles(want) {
		covered := false
		for _, ns := range []string{a.namespace, ""} {
			for _, name := range []string{a.name, ""} {
				covered = covered || have[single{a.group, a.resource, ns, name, a.verb}]
			}
		}
		if covered {
			continue
		}
		k := key{a.group, a.resource, a.namespace, a.name}
		if verbs[k] == nil {
			verbs[k] = map[string]bool{}
		}
		verbs[k][a.verb] = true
	}
	needs := make([]Need, 0, len(verbs))
	for _, k := range slices.Collect(maps.Keys(verbs)) {
		resource, sub, _ := strings.Cut(k.resource, "/")
		n := Need{GVR: schema.GroupVersionResource{Group: k.group, Resource: resource}, Subresource: sub,
			Namespace: k.namespace, Name: k.name}
		for _, v := range install.VerbOrder {
			if verbs[k][v] {
				n.Verbs = append(n.Verbs, v)
			}
		}
		needs = append(needs, n)
	}
	Sort(needs)
	return needs
}
