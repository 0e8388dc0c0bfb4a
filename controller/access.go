package controller

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/controller/registry"
)

// reloadNeeds lists what a prepared config needs beyond the running one:
// the parents it starts watching (new entries, or entries whose watch
// changed), and the child kinds and namespaces it adds to have. Sorted, so
// that the reviews and the messages are the same on every replica.
func (c *Controller) reloadNeeds(p *preparedConfig, have map[schema.GroupVersionKind]*childKind) []registry.AccessNeed {
	var needs []registry.AccessNeed
	for g, pk := range p.next {
		if p.kept[g] {
			continue
		}
		for _, ns := range scopeNamespaces(c.opts.Namespace, pk.res.Namespaces) {
			needs = append(needs,
				registry.AccessNeed{GVR: g, Namespace: ns, Verbs: parentVerbs},
				registry.AccessNeed{GVR: g, Subresource: "status", Namespace: ns, Verbs: statusVerbs})
		}
	}
	for k, ck := range p.children.kinds {
		for _, ns := range slices.Sorted(maps.Keys(ck.informers)) {
			if old := have[k]; old != nil && old.informers[ns] != nil {
				continue
			}
			needs = append(needs, registry.AccessNeed{GVR: ck.gvr, Namespace: ns, Verbs: childVerbs})
		}
	}
	registry.SortNeeds(needs)
	return needs
}

// checkAccess asks whether stencil may do everything needs lists (see
// registry.CheckAccess), bounded by CacheSyncTimeout. Without
// Options.Kube (unit tests) nothing is checked.
func (c *Controller) checkAccess(ctx context.Context, needs []registry.AccessNeed) error {
	if c.opts.Kube == nil {
		return nil
	}
	return registry.CheckAccess(ctx, c.opts.Kube.AuthorizationV1().SelfSubjectAccessReviews(), c.opts.CacheSyncTimeout, needs)
}
