// Package install is what stencil needs from a cluster and how it is
// installed: the RBAC rules of "stencil run" for a config (the rules
// "stencil rbac" prints, "stencil manifests" packs, and a reload checks it
// still has), the manifests that deploy stencil with a team's config, and
// Argo CD's health checks for the kinds it serves (argocd.go).
//
// The design choice a newcomer may question: the rules are computed from
// the compiled entries (package entry), not from the config file alone: a
// chart entry's child kinds are read from its chart, and a CRD's name
// from the schema, so the role granted is the role the run uses.
package install

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/entry"
)

// verbOrder is the order verbs appear in a rule, the order kubectl prints them.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// The verbs stencil needs on what a config names. ClusterRole grants them
// and a reload checks them (package controller) from these lists, so that
// what "stencil rbac" prints and what a reload demands cannot drift apart.
var (
	// ParentVerbs are what the informers of a configured resource need.
	ParentVerbs = []string{"get", "list", "watch"}
	// StatusVerbs are what the merge patch of its status subresource needs.
	StatusVerbs = []string{"patch"}
	// ChildVerbs are what a child kind needs: get, list and watch for its
	// informers, create and patch for server-side apply (which creates),
	// delete for pruning. No update: stencil never PUTs a child.
	ChildVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}
)

// RoleOptions are the run flags that need more than the config's rules.
type RoleOptions struct {
	// ManageCRDs (run --manage-crds) adds CRDRule.
	ManageCRDs bool
	// MetricsSecure (run --metrics-secure) adds MetricsAuthRule.
	MetricsSecure bool
}

// ClusterRole returns the least-privilege ClusterRole that "stencil run" needs
// for cfg: read and watch every configured resource and the CRDs, merge-patch
// its status, apply and prune each entry's child kinds, record events, and
// (for a ring) list the namespaces.
// The leader-election Lease is not here: LeaseRole grants it in stencil's
// own namespace only. A child kind whose resource (plural) is not known
// (not built in, and no resource in the children list) is an error naming
// the entry: a guessed plural would yield a role that silently lacks a
// permission. Rules are sorted by API group, so the output is stable and
// can be checked in.
func ClusterRole(name string, entries []*entry.Entry, o RoleOptions) (*rbacv1.ClusterRole, error) {
	// perms[group][resource] is the set of verbs needed.
	perms := map[string]map[string]map[string]bool{}
	grant := func(group, resource string, verbs ...string) {
		if perms[group] == nil {
			perms[group] = map[string]map[string]bool{}
		}
		if perms[group][resource] == nil {
			perms[group][resource] = map[string]bool{}
		}
		for _, v := range verbs {
			perms[group][resource][v] = true
		}
	}
	for _, r := range entries {
		grant(r.Group, r.Resource.Resource, ParentVerbs...)
		grant(r.Group, r.Resource.Resource+"/status", StatusVerbs...)
		// Children carry blockOwnerDeletion: true. Where the
		// OwnerReferencesPermissionEnforcement admission plugin is on
		// (OpenShift), setting it needs update on the owner's finalizers.
		grant(r.Group, r.Resource.Resource+"/finalizers", "update")
	}
	var errs []error
	for _, r := range entries {
		for _, k := range r.ChildGVKs() {
			res, ok := r.ChildResource(k)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %s: children: the resource (plural) of %s is not known to stencil; add resource: <plural> to its children entry",
					r.File, r.Label, k))
				continue
			}
			grant(res.Group, res.Resource, ChildVerbs...)
		}
	}
	named, err := readGrants(entries, grant)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Which configured resources are served comes from the CRD objects
	// (registry/crd.go); read-only, and only list and watch, as informers need.
	grant("apiextensions.k8s.io", "customresourcedefinitions", "list", "watch")
	grant("", "events", "create", "patch")
	// A ring member (run --ring) divides the namespaces that exist
	// (controller/ring): their names, listed and watched, nothing else.
	grant("", "namespaces", "list", "watch")

	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(perms)) {
		// One rule per distinct verb set within the group.
		byVerbs := map[string]*rbacv1.PolicyRule{}
		var order []string
		for _, res := range slices.Sorted(maps.Keys(perms[group])) {
			var verbs []string
			for _, v := range verbOrder {
				if perms[group][res][v] {
					verbs = append(verbs, v)
				}
			}
			key := strings.Join(verbs, ",")
			if r, ok := byVerbs[key]; ok {
				r.Resources = append(r.Resources, res)
				continue
			}
			byVerbs[key] = &rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res}, Verbs: verbs}
			order = append(order, key)
		}
		for _, key := range order {
			rules = append(rules, *byVerbs[key])
		}
	}
	rules = append(rules, namedReadRules(named, perms)...)
	if rule := CRDRule(entries); o.ManageCRDs && rule != nil {
		rules = append(rules, *rule)
	}
	if o.MetricsSecure {
		rules = append(rules, MetricsAuthRule()...)
	}
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app.kubernetes.io/name": "stencil"},
		},
		Rules: rules,
	}, nil
}

// LeaseRole returns the Role that leader election and a ring need in the
// namespace of their Leases (the namespace is left to the deployment,
// kustomize sets it): a namespaced Role, not a ClusterRole rule over every
// namespace's Leases. A ring member also lists its ring's Leases and
// deletes its own when it leaves.
func LeaseRole(name string) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app.kubernetes.io/name": "stencil"},
		},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "delete"},
		}},
	}
}

// CRDRule is the rule --manage-crds needs: reading and applying exactly
// the CRDs the entries generate (an apply that creates is authorised as a
// create of that name). Nil when they generate none.
func CRDRule(entries []*entry.Entry) *rbacv1.PolicyRule {
	var names []string
	for _, r := range entries {
		if r.CRD != nil {
			names = append(names, r.CRD.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
		ResourceNames: names, Verbs: []string{"get", "create", "patch"}}
}

// MetricsAuthRule is the rule run --metrics-secure needs: the token and
// access reviews that authenticate and authorise a /metrics caller.
func MetricsAuthRule() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
}

// ReadVerbs are what a read needs: its informer's list and watch, and get.
var ReadVerbs = []string{"get", "list", "watch"}

// readGrants grants ReadVerbs on each kind the entries read by a
// computed name or a selector (in any namespace a resource lives in), and
// returns the fixed reads by group, resource and name: those get a rule
// for their names alone (namedReadRules), since stencil watches them by
// name.
func readGrants(entries []*entry.Entry, grant func(group, resource string, verbs ...string)) (map[string]map[string][]string, error) {
	served := make([]config.Resource, len(entries))
	for i, e := range entries {
		served[i] = e.Resource
	}
	named := map[string]map[string][]string{}
	var errs []error
	for _, e := range entries {
		for j, rd := range e.Reads {
			res, ok := config.ReadResource(rd, served)
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %s: reads[%d]: the resource (plural) of %s is not known to stencil; add resource: <plural> to the read",
					e.File, e.Label, j, rd.GVK()))
				continue
			}
			if !rd.Fixed() {
				grant(res.Group, res.Resource, ReadVerbs...)
				continue
			}
			if named[res.Group] == nil {
				named[res.Group] = map[string][]string{}
			}
			if !slices.Contains(named[res.Group][res.Resource], rd.ObjectName) {
				named[res.Group][res.Resource] = append(named[res.Group][res.Resource], rd.ObjectName)
			}
		}
	}
	return named, errors.Join(errs...)
}

// namedReadRules are the rules of the fixed reads, one per resource,
// sorted, leaving out a resource the role already reads whole.
func namedReadRules(named map[string]map[string][]string, perms map[string]map[string]map[string]bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(named)) {
		for _, res := range slices.Sorted(maps.Keys(named[group])) {
			if v := perms[group][res]; v["get"] && v["list"] && v["watch"] {
				continue
			}
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res},
				ResourceNames: slices.Sorted(slices.Values(named[group][res])), Verbs: slices.Clone(ReadVerbs)})
		}
	}
	return rules
}
