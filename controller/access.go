package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/controller/access"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/install"
)

// A reload asks, before it prepares anything of the new config, whether
// stencil may do what the new config needs beyond the running one
// (package controller/access); here is what the controller gives that
// check: the role options of this run and its clients.

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
// running config did not (access.Needs, access.Check), bounded by
// CacheSyncTimeout. Without Options.Kube (unit tests) nothing is checked.
func (c *Controller) checkAccess(ctx context.Context, next []*entry.Entry) error {
	if c.opts.Kube == nil {
		return nil
	}
	needs, err := access.Needs(c.roleOptions(), *c.entries.Load(), next)
	if err != nil {
		return fmt.Errorf("reload refused: %w", err)
	}
	return access.Check(ctx, c.opts.Kube.AuthorizationV1().SelfSubjectAccessReviews(), c.opts.CacheSyncTimeout, needs)
}
