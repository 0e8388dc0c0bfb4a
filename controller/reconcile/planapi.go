package reconcile

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller/registry"
)

// What the planner (package plan, "stencil diff") shares with sync, so that
// its plan is made the way sync makes its writes: DryRunApply (dryrun.go),
// status.TemplateStatus, and the ones below; the applied hash and the
// revision annotation are the drift package's, the namespaces an entry
// covers the registry's.

// RevisionOnChildren reports whether the controller stamps the template
// revision on each child of res, rendered with set, rather than in its
// status (rollout.go): a rollout entry whose CRD's status schema prunes
// the status field. It reads the CRD from the API server; a kind without
// one (built in) keeps the revision in status.
func RevisionOnChildren(ctx context.Context, client dynamic.Interface, res config.Resource) (bool, error) {
	if res.Rollout == nil {
		return false, nil
	}
	crd, err := client.Resource(registry.CRDResource).Get(ctx, res.Resource+"."+res.Group, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the CRD of %s: %w", res, err)
	}
	stripped, err := registry.StripCRD(crd)
	if err != nil {
		return false, fmt.Errorf("reading the CRD of %s: %w", res, err)
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(stripped); err != nil {
		return false, fmt.Errorf("reading the CRD of %s: %w", res, err)
	}
	s, ok := registry.StatusSchema(store, res)
	return ok && prunesRevision(s), nil
}

// IsRejected reports whether the API server refused a write, or a dry run,
// for its content (invalid, too large): the same content is refused again,
// so the plan reports that child as failed, as sync does.
func IsRejected(err error) bool { return isRejected(err) }
