package controller

import (
	"context"

	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/install"
)

// additionNeeds turns what a reload adds to what stencil watches into the
// verbs each addition needs: get, list and watch of a configured resource
// and patch of its status, or what a child kind needs (package install's
// lists, the ones stencil rbac prints).
func additionNeeds(adds []registry.Addition) []registry.AccessNeed {
	var needs []registry.AccessNeed
	for _, a := range adds {
		if a.Child {
			needs = append(needs, registry.AccessNeed{GVR: a.GVR, Namespace: a.Namespace, Verbs: install.ChildVerbs})
			continue
		}
		needs = append(needs,
			registry.AccessNeed{GVR: a.GVR, Namespace: a.Namespace, Verbs: install.ParentVerbs},
			registry.AccessNeed{GVR: a.GVR, Subresource: "status", Namespace: a.Namespace, Verbs: install.StatusVerbs})
	}
	registry.SortNeeds(needs)
	return needs
}

// checkAccess asks whether stencil may do everything a reload adds (see
// registry.CheckAccess), bounded by CacheSyncTimeout. Without
// Options.Kube (unit tests) nothing is checked.
func (c *Controller) checkAccess(ctx context.Context, adds []registry.Addition) error {
	if c.opts.Kube == nil {
		return nil
	}
	return registry.CheckAccess(ctx, c.opts.Kube.AuthorizationV1().SelfSubjectAccessReviews(), c.opts.CacheSyncTimeout, additionNeeds(adds))
}
