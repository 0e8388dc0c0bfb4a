package reconcile

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/entry"
)

// CRDChange is what applying one generated CRD would do: Want is the CRD
// to apply (its applied hash stamped), Live the CRD in the cluster (nil:
// it would be created), Result the API server's answer to a dry-run apply
// of Want.
type CRDChange struct {
	Want, Live, Result *unstructured.Unstructured
}

// PlanCRDs is the one decision on the CRDs the entries generate, which
// "run --manage-crds" carries out (ApplyCRDs) and "diff --manage-crds"
// prints: each is sent as a server-side dry run (the API server's checks,
// CEL rules included; a CRD it refuses refuses them all, joined), and it
// changes the cluster when it does not exist or when the dry run's answer
// differs from the live CRD. A hand-edited CRD is such a change, whatever
// its applied-hash annotation says: the answer is compared, not the hash.
// It returns the CRDs that change.
func PlanCRDs(ctx context.Context, client dynamic.Interface, entries []*entry.Entry) ([]CRDChange, error) {
	objs, err := entry.CRDObjects(entries)
	if err != nil {
		return nil, err
	}
	crds := client.Resource(registry.CRDResource)
	var (
		out  []CRDChange
		errs []error
	)
	for _, want := range objs {
		if _, err := drift.StampHash(want); err != nil {
			return nil, err
		}
		result, err := dryRunApply(ctx, crds, want)
		if err != nil {
			errs = append(errs, fmt.Errorf("CRD %s: %w", want.GetName(), err))
			continue
		}
		live, err := crds.Get(ctx, want.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, CRDChange{Want: want, Result: result})
		case err != nil:
			errs = append(errs, fmt.Errorf("reading CRD %s: %w", want.GetName(), err))
		case !reflect.DeepEqual(comparable(live), comparable(result)):
			out = append(out, CRDChange{Want: want, Live: live, Result: result})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
