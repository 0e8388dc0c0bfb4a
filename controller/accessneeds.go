package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/install"
)

// A reload asks the API server for what package install grants the new
// config (install.Grants: the rules "stencil rbac" prints, with where
// stencil uses each), not for a list of its own: child kinds, read kinds
// (by name where a read is fixed), the configured resources, their status
// and finalizers, events, the CRDs and, with --manage-crds, the CRDs it
// writes. A permission "stencil rbac" gains is asked the day it is added.

// access is one verb on one resource (or all of its objects, name ""), in
// one namespace (or all, "").
type access struct {
	group, resource, namespace, name, verb string
}

// accesses expands stencil's own grants into single accesses: what an
// identity holds (install.IdentityRoles) is the platform's to bind, not
// stencil's to have.
func accesses(grants []install.Grant) []access {
	var out []access
	for _, g := range install.Own(grants) {
		names := g.Names
		if len(names) == 0 {
			names = []string{""}
		}
		for _, ns := range g.Namespaces {
			for _, name := range names {
				for _, verb := range g.Verbs {
					out = append(out, access{group: g.Group, resource: g.Resource, namespace: ns, name: name, verb: verb})
				}
			}
		}
	}
	return out
}

// accessNeeds lists what stencil needs for next and did not need for
// running, both derived by install.Grants with o (needsBeyond). Only what
// is new is asked, as a reload starts only what is new: what the running
// config needs was there when it started.
func accessNeeds(o install.RoleOptions, running, next []*entry.Entry) ([]registry.AccessNeed, error) {
	want, err := install.Grants(next, o)
	if err != nil {
		return nil, fmt.Errorf("deriving what the new config needs: %w", err)
	}
	// A running config's grants that cannot be derived whole only make the
	// check ask more.
	had, _ := install.Grants(running, o)
	return needsBeyond(want, had), nil
}

// needsBeyond lists the accesses of want that had does not cover: one
// need per resource, namespace and object, its verbs in a rule's order,
// sorted. had covers an access when it holds that verb on that resource
// in that namespace or in every namespace, on that object or on all.
func needsBeyond(want, had []install.Grant) []registry.AccessNeed {
	have := map[access]bool{}
	for _, a := range accesses(had) {
		have[a] = true
	}
	type key struct{ group, resource, namespace, name string }
	verbs := map[key]map[string]bool{}
	for _, a := range accesses(want) {
		covered := false
		for _, ns := range []string{a.namespace, ""} {
			for _, name := range []string{a.name, ""} {
				covered = covered || have[access{a.group, a.resource, ns, name, a.verb}]
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
	needs := make([]registry.AccessNeed, 0, len(verbs))
	for _, k := range slices.Collect(maps.Keys(verbs)) {
		resource, sub, _ := strings.Cut(k.resource, "/")
		n := registry.AccessNeed{GVR: schema.GroupVersionResource{Group: k.group, Resource: resource}, Subresource: sub,
			Namespace: k.namespace, Name: k.name}
		for _, v := range install.VerbOrder {
			if verbs[k][v] {
				n.Verbs = append(n.Verbs, v)
			}
		}
		needs = append(needs, n)
	}
	registry.SortNeeds(needs)
	return needs
}

// roleOptions are the install.RoleOptions of this run: its flags, its
// --namespace, and its RESTMapper for the kinds stencil's table does not
// know.
func (c *Controller) roleOptions() install.RoleOptions {
	return install.RoleOptions{
		ManageCRDs: c.opts.ManageCRDs, MetricsSecure: c.opts.MetricsSecure,
		Scope: func(ns []string) []string { return registry.ScopeNamespaces(c.opts.Namespace, ns) },
		Resolve: func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
			if c.opts.Mapper == nil {
				return schema.GroupVersionResource{}, false
			}
			m, err := c.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return schema.GroupVersionResource{}, false
			}
			return m.Resource, true
		},
	}
}

// checkAccess asks whether stencil may do everything next needs that the
// running config did not (accessNeeds; registry.CheckAccess), bounded by
// CacheSyncTimeout. Without Options.Kube (unit tests) nothing is checked.
func (c *Controller) checkAccess(ctx context.Context, next []*entry.Entry) error {
	if c.opts.Kube == nil {
		return nil
	}
	needs, err := accessNeeds(c.roleOptions(), *c.entries.Load(), next)
	if err != nil {
		return fmt.Errorf("reload refused: %w", err)
	}
	return registry.CheckAccess(ctx, c.opts.Kube.AuthorizationV1().SelfSubjectAccessReviews(), c.opts.CacheSyncTimeout, needs)
}
