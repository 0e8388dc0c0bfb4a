package main

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"stencil.dev/stencil/config"
)

// validate --server's identity check: stencil writes an entry's children
// as its identity by impersonating the identity's ServiceAccount, so the
// API server must let stencil's own account impersonate it (and get it,
// to tell a missing account from a refused write). A config whose
// identities stencil may not impersonate would load, and then report
// every resource of the entry refused; validate says so before the config
// ships. The question is asked with a SubjectAccessReview about stencil's
// account (--controller-account), not about the caller, through the typed
// authorization client alone: the whole clientset would add 12 MB to the
// binary (and its RSS to every stencil process).

// checkImpersonation asks, for each entry with an identity, whether
// account ("NS/NAME", stencil's ServiceAccount) may get and impersonate
// the identity's ServiceAccount: in each namespace the entry lists (a
// tenant identity; every namespace when it lists none), or in the
// account's own namespace (a fixed one). It returns one line per refusal,
// naming the entry, the identity and what is missing.
func checkImpersonation(ctx context.Context, reviews authorizationv1client.SubjectAccessReviewInterface, cfg *config.Config, account string) ([]string, error) {
	ns, name, ok := strings.Cut(account, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--controller-account %q: want NAMESPACE/NAME of stencil's ServiceAccount", account)
	}
	user := config.ServiceAccountUser(ns, name)
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	var refused []string
	for i, res := range cfg.Resources {
		id := res.Identity
		if id == nil {
			continue
		}
		namespaces := []string{metav1.NamespaceAll}
		if id.Tenant == "" {
			namespaces = []string{id.Namespace}
		} else if len(res.Namespaces) > 0 {
			namespaces = res.Namespaces
		}
		_, target := id.Account(metav1.NamespaceAll)
		for _, where := range namespaces {
			var missing []string
			for _, verb := range []string{"get", "impersonate"} {
				review, err := reviews.Create(ctx, &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: where, Verb: verb, Resource: "serviceaccounts", Name: target,
					}},
				}, metav1.CreateOptions{})
				if err != nil {
					return nil, fmt.Errorf("asking whether %s may %s ServiceAccount %s: %w", user, verb, target, err)
				}
				if !review.Status.Allowed {
					missing = append(missing, verb)
				}
			}
			if len(missing) == 0 {
				continue
			}
			in := "in every namespace"
			if where != "" {
				in = "in namespace " + where
			}
			refused = append(refused, fmt.Sprintf("%s: %s: identity %s: %s may not %s ServiceAccount %s %s (bind the ClusterRole stencil rbac prints to %s)",
				cfg.Path, cfg.EntryLabel(i), id, user, strings.Join(missing, " or "), target, in, account))
		}
	}
	return refused, nil
}
