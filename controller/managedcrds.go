package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/entry"
)

// Managed CRDs (run --manage-crds): the CRDs generated from the entries
// with a schema are applied at start and on every reload, just before the
// config is swapped in. Each is first sent as a dry run, all of them,
// before the reload prepares anything, so a CRD the API server refuses
// refuses the reload whole; the writes come once every other check of the
// reload (RBAC, the informers' sync) has passed, so a reload refused for
// any reason has written nothing; then each is applied with server-side apply where the dry run's answer
// differs from the live CRD (reconcile.PlanCRDs, the decision "stencil
// diff --manage-crds" prints): a restart costs no write, and a hand-edited
// CRD is put back. A CRD is never deleted: removing an entry would
// otherwise delete every tenant's resources with it.

// applyCRDs brings the CRDs of the entries to the cluster (see above):
// reconcile.PlanCRDs decides, and each CRD it says changes is applied.
// mayWrite says whether this replica writes them (the leader, or the ring
// member that holds cluster-scoped writes); the others only check them.
func applyCRDs(ctx context.Context, client dynamic.Interface, entries []*entry.Entry, mayWrite bool) error {
	changes, err := reconcile.PlanCRDs(ctx, client, entries)
	if err != nil || !mayWrite {
		return err
	}
	return writeCRDs(ctx, client, changes)
}

// writeCRDs applies the CRD changes PlanCRDs decided.
func writeCRDs(ctx context.Context, client dynamic.Interface, changes []reconcile.CRDChange) error {
	crds := client.Resource(registry.CRDResource)
	logger := klog.FromContext(ctx)
	for _, c := range changes {
		if _, err := crds.Apply(ctx, c.Want.GetName(), c.Want, metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", c.Want.GetName(), err)
		}
		logger.Info("Applied CRD", "crd", c.Want.GetName(), "created", c.Live == nil)
	}
	return nil
}
