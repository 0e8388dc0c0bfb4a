package controller

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/templates"
)

// Reconfigure swaps in a new, already validated config and its templates,
// all or nothing (registry.Registry.Reconfigure), then renders every custom
// resource of the new config again: that applies what a changed template
// now renders, and costs nothing where it renders the same. A refused
// reload changes nothing and returns an error naming the resource (and the
// refused verbs). It works before Run too (a standby replica keeps its
// config current), and is safe to call while workers run.
func (c *Controller) Reconfigure(ctx context.Context, cfg *config.Config, sets []*templates.Set) error {
	// First of all: a reload stencil lacks the RBAC for is refused whole,
	// before anything of it is planned, prepared or written.
	if err := c.checkAccess(ctx, templates.Entries(sets)); err != nil {
		return fmt.Errorf("%s: %w", cfg.Path, err)
	}
	var beforeCommit func(context.Context) error
	if c.opts.ManageCRDs {
		// First, the dry run: a reload whose CRD the API server refuses
		// is refused whole. The writes come last, once the registry has
		// prepared and checked everything else, just before the swap.
		changes, err := reconcile.PlanCRDs(ctx, c.opts.Dynamic, templates.Entries(sets))
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Path, err)
		}
		if len(changes) > 0 && c.mayWrite("") == nil {
			beforeCommit = func(ctx context.Context) error {
				if err := writeCRDs(ctx, c.opts.Dynamic, changes); err != nil {
					return fmt.Errorf("%s: %w", cfg.Path, err)
				}
				return nil
			}
		}
	}
	gvrs, err := c.reg.Reconfigure(ctx, cfg, sets, beforeCommit)
	if err != nil {
		return err
	}
	c.config.Store(cfg)
	if c.opts.Wall != nil {
		// The old generation's idle workers stop now.
		c.opts.Wall.Current(sets)
	}
	entries := templates.Entries(sets)
	c.entries.Store(&entries)
	c.rec.ForgetUnconfigured()
	// Those of new entries too, whose informers' first events reached the
	// workers before the entry was published.
	n := 0
	for _, g := range gvrs {
		n += c.enqueueResource(g)
	}
	klog.FromContext(ctx).Info("Config reloaded", "resources", len(cfg.Resources), "requeued", n)
	return nil
}
