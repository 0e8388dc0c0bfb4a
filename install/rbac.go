// Package install is what stencil needs from a cluster and how it is
// installed: the RBAC rules of "stencil run" for a config (Grants: the
// rules "stencil rbac" prints and "stencil manifests" packs, and what a
// reload asks the API server for before it starts anything), the
// manifests that deploy stencil with a team's config, and Argo CD's health
// checks for the kinds it serves (argocd.go).
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
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/entry"
)

// VerbOrder is the order verbs appear in a rule, the order kubectl prints
// them; a reload's refusal lists the verbs it lacks in the same order.
var VerbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete", "impersonate"}

// The verbs stencil needs on what a config names. Grants hands them to
// both the ClusterRole and a reload's access check (package controller),
// so that what "stencil rbac" prints and what a reload demands cannot
// drift apart.
var (
	// ParentVerbs are what the informers of a configured resource need.
	ParentVerbs = []string{"get", "list", "watch"}
	// ChartParentVerbs are a chart entry's: ParentVerbs and patch, which
	// removing helm-operator's finalizer from a deleted resource needs
	// (docs/charts.md, "Moving from helm-operator").
	ChartParentVerbs = []string{"get", "list", "watch", "patch"}
	// StatusVerbs are what the merge patch of its status subresource needs.
	StatusVerbs = []string{"patch"}
	// ChildVerbs are what a child kind needs: get, list and watch for its
	// informers, create and patch for server-side apply (which creates),
	// delete for pruning. No update: stencil never PUTs a child.
	ChildVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}
	// ChildWriteVerbs are the verbs of ChildVerbs that write: what an
	// entry's identity holds on its child kinds instead of stencil.
	ChildWriteVerbs = []string{"create", "patch", "delete"}
	// IdentityVerbs are what stencil needs on an identity's
	// ServiceAccount, by name: get (it must exist before anything is
	// written as it) and impersonate.
	IdentityVerbs = []string{"get", "impersonate"}
	// ReadVerbs are what a read needs: its informer's list and watch, and get.
	ReadVerbs = []string{"get", "list", "watch"}
)

// RoleOptions are the run flags that need more than the config's rules,
// and what a running stencil knows that "stencil rbac" does not.
type RoleOptions struct {
	// ManageCRDs (run --manage-crds) adds reading and applying the CRDs
	// the entries generate, by name.
	ManageCRDs bool
	// MetricsSecure (run --metrics-secure) adds the token and access
	// reviews that authenticate and authorise a /metrics caller.
	MetricsSecure bool
	// Scope narrows the namespaces an entry lists (none: every namespace)
	// to those stencil uses: a running stencil's --namespace. Nil keeps
	// them. It says where a Grant is used (Grant.Namespaces), never what
	// the ClusterRole holds, which is cluster-wide either way.
	Scope func(entryNamespaces []string) []string
	// Resolve, when set, names the resource of a kind that neither
	// stencil's table nor the config names: a running stencil asks its
	// RESTMapper. A kind it cannot name either is then left out, not an
	// error: not served yet, it cannot be watched yet (the registry waits
	// for its CRD). Nil leaves such a kind an error naming the entry.
	Resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)
}

// Grant is one permission stencil needs for a config, and where it uses
// it. Grants is the one derivation of them: ClusterRole folds them into
// the rules "stencil rbac" prints, and a reload's access check asks the
// API server for each, so the two cannot drift apart.
type Grant struct {
	// Group and Resource name it as a rule does; Resource may end in a
	// subresource (webapps/status).
	Group, Resource string
	// Names, when set, limit it to these objects (a rule's resourceNames).
	Names []string
	// Verbs are in VerbOrder.
	Verbs []string
	// Namespaces are where stencil uses it, sorted. "" is every namespace
	// and then stands alone; a cluster-scoped resource has just "". Empty
	// when stencil uses it nowhere (run --namespace outside the namespaces
	// its entries list).
	Namespaces []string
	// Holder is who needs it: "" for stencil's own account, else an
	// entry's identity as config.Identity.String names it ("tenant
	// builder"), whose role the platform binds (IdentityRoles).
	Holder string
	// apart makes it a rule of its own, after the config's: what a run
	// flag adds.
	apart bool
}

// Grants derives what "stencil run" needs for entries: read and watch
// every configured resource, merge-patch its status, apply and prune each
// entry's child kinds, read what the entries read (one name where fixed),
// watch the CRDs, record events, and (for a ring) list the namespaces;
// o adds what run flags need. An entry with an identity moves the writes
// of its children (and the owner's finalizers they need) to the identity
// (Grant.Holder), and gives stencil get and impersonate on exactly the
// account it names: stencil keeps only get, list and watch on that
// entry's child kinds. A kind whose resource (plural) is not known
// (not built in, not named by the config, and not resolved by o.Resolve)
// is an error naming the entry: a guessed plural would yield a role that
// silently lacks a permission. Every grant is returned with the errors.
func Grants(entries []*entry.Entry, o RoleOptions) ([]Grant, error) {
	scope := o.Scope
	if scope == nil {
		scope = func(ns []string) []string {
			if len(ns) == 0 {
				return []string{metav1.NamespaceAll}
			}
			return ns
		}
	}
	// Where each entry's resources live, and where all of them do: child
	// informers and events span every namespace stencil serves.
	entryNS := make([][]string, len(entries))
	var served []string
	for i, e := range entries {
		entryNS[i] = scope(e.Namespaces)
		served = append(served, entryNS[i]...)
	}
	served = where(served)
	cluster := []string{metav1.NamespaceAll}

	var grants []Grant
	add := func(group, resource string, verbs []string, namespaces []string) {
		grants = append(grants, Grant{Group: group, Resource: resource, Verbs: slices.Clone(verbs), Namespaces: where(namespaces)})
	}
	for i, e := range entries {
		verbs := ParentVerbs
		if e.Chart != "" {
			verbs = ChartParentVerbs
		}
		add(e.Group, e.Resource.Resource, verbs, entryNS[i])
		add(e.Group, e.Resource.Resource+"/status", StatusVerbs, entryNS[i])
		// Children carry blockOwnerDeletion: true. Where the
		// OwnerReferencesPermissionEnforcement admission plugin is on
		// (OpenShift), setting it needs update on the owner's finalizers:
		// whoever writes the children needs it.
		finalizers := Grant{Group: e.Group, Resource: e.Resource.Resource + "/finalizers", Verbs: []string{"update"}, Namespaces: where(entryNS[i])}
		if id := e.Identity; id != nil {
			finalizers.Holder = id.String()
			grants = append(grants, identityGrant(id, entryNS[i]))
		}
		grants = append(grants, finalizers)
	}
	var errs []error
	for i, e := range entries {
		for _, k := range e.ChildGVKs() {
			res, ok := e.ChildResource(k)
			if !ok && o.Resolve != nil {
				if res, ok = o.Resolve(k); !ok {
					continue
				}
			}
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %s: children: the resource (plural) of %s is not known to stencil; add resource: <plural> to its children entry",
					e.File, e.Label, k))
				continue
			}
			if e.Identity == nil {
				add(res.Group, res.Resource, ChildVerbs, served)
				continue
			}
			// Stencil's informers and reads; the identity's writes.
			add(res.Group, res.Resource, ReadVerbs, served)
			grants = append(grants, Grant{Group: res.Group, Resource: res.Resource, Verbs: slices.Clone(ChildWriteVerbs),
				Namespaces: where(entryNS[i]), Holder: e.Identity.String()})
		}
	}
	reads, err := readGrants(entries, entryNS, o.Resolve)
	grants = append(grants, reads...)
	if err != nil {
		errs = append(errs, err)
	}
	// Which configured resources are served comes from the CRD objects
	// (registry/crd.go); read-only, and only list and watch, as informers need.
	add("apiextensions.k8s.io", "customresourcedefinitions", []string{"list", "watch"}, cluster)
	// Events are recorded on the custom resources, in their namespaces.
	add("", "events", []string{"create", "patch"}, served)
	// A ring member (run --ring) divides the namespaces that exist
	// (controller/ring): their names, listed and watched, nothing else.
	add("", "namespaces", []string{"list", "watch"}, cluster)
	if o.ManageCRDs {
		if g := crdGrant(entries); g != nil {
			grants = append(grants, *g)
		}
	}
	if o.MetricsSecure {
		grants = append(grants,
			Grant{Group: "authentication.k8s.io", Resource: "tokenreviews", Verbs: []string{"create"}, Namespaces: cluster, apart: true},
			Grant{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verbs: []string{"create"}, Namespaces: cluster, apart: true})
	}
	return grants, errors.Join(errs...)
}

// identityGrant is what stencil needs to write as id for an entry whose
// resources live in namespaces: get and impersonate on the account id
// names, in its namespace (tenant: the resources' namespaces).
func identityGrant(id *config.Identity, namespaces []string) Grant {
	ns, name := id.Account(metav1.NamespaceAll)
	if id.Tenant == "" {
		namespaces = []string{ns}
	}
	return Grant{Resource: "serviceaccounts", Names: []string{name}, Verbs: slices.Clone(IdentityVerbs), Namespaces: where(namespaces)}
}

// Own returns the grants stencil's own account holds (Holder ""): what
// its ClusterRole folds and a reload asks for.
func Own(grants []Grant) []Grant {
	return slices.DeleteFunc(slices.Clone(grants), func(g Grant) bool { return g.Holder != "" })
}

// where sorts and deduplicates namespaces; every namespace ("") includes
// the others.
func where(namespaces []string) []string {
	if slices.Contains(namespaces, metav1.NamespaceAll) {
		return []string{metav1.NamespaceAll}
	}
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return slices.Compact(out)
}

// ClusterRole returns the least-privilege ClusterRole that "stencil run" needs
// for entries: Grants, one rule per API group and verb set, sorted by API
// group, so the output is stable and can be checked in; then the fixed
// reads' rules by name, then what run flags add.
// The leader-election Lease is not here: LeaseRole grants it in stencil's
// own namespace only.
func ClusterRole(name string, entries []*entry.Entry, o RoleOptions) (*rbacv1.ClusterRole, error) {
	grants, err := Grants(entries, o)
	if err != nil {
		return nil, err
	}
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"app.kubernetes.io/name": "stencil"},
		},
		Rules: Rules(Own(grants)),
	}, nil
}

// IdentityRoles returns, for each identity the entries name, the
// ClusterRole the platform binds to its account (sorted by identity):
// create, patch and delete on the child kinds of its entries, and update
// on their resources' finalizers, which the API server's
// OwnerReferencesPermissionEnforcement admission requires of whoever sets
// blockOwnerDeletion. A tenant's role is bound in each tenant namespace
// (a RoleBinding to the ClusterRole); a fixed account's, where its
// entries' resources live. Each is named prefix-identity-<identity>. They
// come from Grants, as stencil's own role does.
func IdentityRoles(prefix string, entries []*entry.Entry, o RoleOptions) ([]*rbacv1.ClusterRole, error) {
	grants, err := Grants(entries, o)
	if err != nil {
		return nil, err
	}
	byHolder := map[string][]Grant{}
	for _, g := range grants {
		if g.Holder != "" {
			byHolder[g.Holder] = append(byHolder[g.Holder], g)
		}
	}
	var roles []*rbacv1.ClusterRole
	slug := strings.NewReplacer(" ", "-", "/", "-")
	for _, holder := range slices.Sorted(maps.Keys(byHolder)) {
		roles = append(roles, &rbacv1.ClusterRole{
			TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{
				Name:        prefix + "-identity-" + strings.ToLower(slug.Replace(holder)),
				Labels:      map[string]string{"app.kubernetes.io/name": "stencil"},
				Annotations: map[string]string{IdentityAnnotation: holder},
			},
			Rules: Rules(byHolder[holder]),
		})
	}
	return roles, nil
}

// IdentityAnnotation, on a role IdentityRoles returns, names the identity
// to bind it to, as the config does ("tenant builder").
const IdentityAnnotation = "stencil.dev/identity"

// Rules folds grants into a role's rules, cluster-wide: where each is used
// does not matter to a ClusterRole.
func Rules(grants []Grant) []rbacv1.PolicyRule {
	// perms[group][resource] is the set of verbs needed on every object;
	// named[group][resource] the objects of the grants by name.
	perms := map[string]map[string]map[string]bool{}
	named := map[string]map[string]*Grant{}
	var apart []rbacv1.PolicyRule
	for _, g := range grants {
		switch {
		case g.apart:
			apart = append(apart, rbacv1.PolicyRule{APIGroups: []string{g.Group}, Resources: []string{g.Resource},
				ResourceNames: slices.Clone(g.Names), Verbs: slices.Clone(g.Verbs)})
		case len(g.Names) > 0:
			if named[g.Group] == nil {
				named[g.Group] = map[string]*Grant{}
			}
			n := named[g.Group][g.Resource]
			if n == nil {
				n = &Grant{}
				named[g.Group][g.Resource] = n
			}
			n.Names = append(n.Names, g.Names...)
			n.Verbs = append(n.Verbs, g.Verbs...)
		default:
			if perms[g.Group] == nil {
				perms[g.Group] = map[string]map[string]bool{}
			}
			if perms[g.Group][g.Resource] == nil {
				perms[g.Group][g.Resource] = map[string]bool{}
			}
			for _, v := range g.Verbs {
				perms[g.Group][g.Resource][v] = true
			}
		}
	}
	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(perms)) {
		// One rule per distinct verb set within the group.
		byVerbs := map[string]*rbacv1.PolicyRule{}
		var order []string
		for _, res := range slices.Sorted(maps.Keys(perms[group])) {
			verbs := inOrder(perms[group][res])
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
	// One rule per resource read by name, leaving out a resource the role
	// already grants those verbs on whole.
	for _, group := range slices.Sorted(maps.Keys(named)) {
		for _, res := range slices.Sorted(maps.Keys(named[group])) {
			n := named[group][res]
			if !slices.ContainsFunc(n.Verbs, func(v string) bool { return !perms[group][res][v] }) {
				continue
			}
			verbs := map[string]bool{}
			for _, v := range n.Verbs {
				verbs[v] = true
			}
			names := slices.Sorted(slices.Values(n.Names))
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res},
				ResourceNames: slices.Compact(names), Verbs: inOrder(verbs)})
		}
	}
	return append(rules, apart...)
}

// inOrder lists a set of verbs in VerbOrder.
func inOrder(set map[string]bool) []string {
	var verbs []string
	for _, v := range VerbOrder {
		if set[v] {
			verbs = append(verbs, v)
		}
	}
	return verbs
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

// crdGrant is what --manage-crds needs: reading and applying exactly the
// CRDs the entries generate (an apply that creates is authorised as a
// create of that name). Nil when they generate none.
func crdGrant(entries []*entry.Entry) *Grant {
	var names []string
	for _, r := range entries {
		if r.CRD != nil {
			names = append(names, r.CRD.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &Grant{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Names: names,
		Verbs: []string{"get", "create", "patch"}, Namespaces: []string{metav1.NamespaceAll}, apart: true}
}

// readGrants grants ReadVerbs on each kind the entries read by a computed
// name or a selector (and, for an entry with an identity, get or list to
// the identity, and access reviews to stencil), where the reading entry's resources live (entryNS,
// by entry), and on the object alone for a fixed read, since stencil
// watches it by name: in the namespace the platform fixed, else where the
// entry's resources live. resolve is RoleOptions.Resolve.
func readGrants(entries []*entry.Entry, entryNS [][]string, resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, bool)) ([]Grant, error) {
	served := make([]config.Resource, len(entries))
	for i, e := range entries {
		served[i] = e.Resource
	}
	var grants []Grant
	var errs []error
	reviews := false
	for i, e := range entries {
		for j, rd := range e.Reads {
			res, ok := config.ReadResource(rd, served)
			if !ok && resolve != nil {
				if res, ok = resolve(rd.GVK()); !ok {
					continue
				}
			}
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %s: reads[%d]: the resource (plural) of %s is not known to stencil; add resource: <plural> to the read",
					e.File, e.Label, j, rd.GVK()))
				continue
			}
			g := Grant{Group: res.Group, Resource: res.Resource, Verbs: slices.Clone(ReadVerbs), Namespaces: where(entryNS[i])}
			if e.Identity != nil && !rd.Fixed() {
				// What the tenant names is read only when the identity
				// may: it gets (a name) or lists (a selector) it itself,
				// and stencil asks the API server (an access review).
				verb := "get"
				if rd.Selector != nil {
					verb = "list"
				}
				reviews = true
				grants = append(grants, Grant{Group: res.Group, Resource: res.Resource, Verbs: []string{verb},
					Namespaces: where(entryNS[i]), Holder: e.Identity.String()})
			}
			if rd.Fixed() {
				g.Names = []string{rd.ObjectName}
				if rd.Namespace != "" && len(g.Namespaces) > 0 {
					// Fixed by the platform: --namespace does not narrow it
					// (package controller/reads watches it there).
					g.Namespaces = []string{rd.Namespace}
				}
			}
			grants = append(grants, g)
		}
	}
	if reviews {
		grants = append(grants, Grant{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verbs: []string{"create"},
			Namespaces: []string{metav1.NamespaceAll}})
	}
	return grants, errors.Join(errs...)
}
