package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/drift"
	"stencil.dev/stencil/controller/registry"
	"stencil.dev/stencil/entry"
)

// Managed CRDs (run --manage-crds): the CRDs generated from the entries
// with a schema are applied at start and on every reload, before the
// config is swapped in. Each is first sent as a dry run, all of them, so a
// CRD the API server refuses refuses the reload whole and changes nothing;
// then each is applied with server-side apply, unless its applied hash says
// the live CRD already is this one (a restart costs no write). A CRD is
// never deleted: removing an entry would otherwise delete every tenant's
// resources with it.

// DryRunCRDs sends every CRD the entries generate to the API server as a dry-run
// apply: the checks that need the API server (CEL rules compile within
// their cost, package config/crd says which), with nothing written. It
// returns the CRDs, hash-stamped, and every refusal, joined.
func DryRunCRDs(ctx context.Context, client dynamic.Interface, entries []*entry.Entry) ([]*unstructured.Unstructured, error) {
	objs, err := entry.CRDObjects(entries)
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	crds := client.Resource(registry.CRDResource)
	var errs []error
	for _, u := range objs {
		if _, err := drift.StampHash(u); err != nil {
			return nil, err
		}
		_, err := crds.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			errs = append(errs, fmt.Errorf("CRD %s: %w", u.GetName(), err))
		}
	}
	return objs, errors.Join(errs...)
}

// applyCRDs brings the CRDs of the entries to the cluster (see above). mayWrite
// says whether this replica writes them (the leader, or the ring member
// that holds cluster-scoped writes); the others only check them.
func applyCRDs(ctx context.Context, client dynamic.Interface, entries []*entry.Entry, mayWrite bool) error {
	objs, err := DryRunCRDs(ctx, client, entries)
	if err != nil || len(objs) == 0 || !mayWrite {
		return err
	}
	crds := client.Resource(registry.CRDResource)
	logger := klog.FromContext(ctx)
	for _, u := range objs {
		live, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading CRD %s: %w", u.GetName(), err)
		}
		if err == nil && live.GetAnnotations()[contract.AnnotationAppliedHash] == u.GetAnnotations()[contract.AnnotationAppliedHash] {
			continue
		}
		if _, err := crds.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", u.GetName(), err)
		}
		logger.Info("Applied CRD", "crd", u.GetName())
	}
	return nil
}
