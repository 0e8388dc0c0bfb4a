package offline

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RBAC as the API server would check an entry's identity's writes, from a
// case's objects (ServiceAccounts, Roles, ClusterRoles and their bindings):
// what the controller's impersonating client would be answered, so that a
// case can expect Forbidden. Only RBAC: no webhook authorizer, no
// aggregated ClusterRoles.

// rbac is a case's RBAC objects, indexed.
type rbac struct {
	// accounts holds "ns/name" of each ServiceAccount.
	accounts map[string]bool
	// rules holds each Role's rules by "ns/name", each ClusterRole's by
	// "/name".
	rules    map[string][]rbacv1.PolicyRule
	bindings []binding
}

// binding is a RoleBinding (namespace set) or ClusterRoleBinding.
type binding struct {
	namespace string
	role      string
	subjects  []rbacv1.Subject
}

// newRBAC indexes objs; an object of another kind is an error naming it.
func newRBAC(objs []*unstructured.Unstructured) (*rbac, error) {
	r := &rbac{accounts: map[string]bool{}, rules: map[string][]rbacv1.PolicyRule{}}
	for _, u := range objs {
		name := u.GetKind() + " " + u.GetName()
		switch gk := u.GroupVersionKind().GroupKind(); gk {
		case schema.GroupKind{Kind: "ServiceAccount"}:
			r.accounts[u.GetNamespace()+"/"+u.GetName()] = true
		case schema.GroupKind{Group: rbacv1.GroupName, Kind: "Role"}, schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"}:
			var role rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ns := u.GetNamespace()
			if gk.Kind == "ClusterRole" {
				ns = ""
			}
			r.rules[ns+"/"+u.GetName()] = role.Rules
		case schema.GroupKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}, schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"}:
			var rb rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rb); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			b := binding{subjects: rb.Subjects, role: "/" + rb.RoleRef.Name}
			if gk.Kind == "RoleBinding" {
				b.namespace = u.GetNamespace()
				if rb.RoleRef.Kind == "Role" {
					b.role = u.GetNamespace() + "/" + rb.RoleRef.Name
				}
			}
			r.bindings = append(r.bindings, b)
		default:
			return nil, fmt.Errorf("%s: rbac holds ServiceAccounts, Roles, ClusterRoles and their bindings, not %s", name, gk)
		}
	}
	return r, nil
}

// hasAccount reports whether the ServiceAccount ns/name exists.
func (r *rbac) hasAccount(ns, name string) bool { return r.accounts[ns+"/"+name] }

// allowed returns nil when user may verb the object ns/name of gvr (its
// subresource, when set), else the API server's Forbidden answer.
func (r *rbac) allowed(user, verb string, gvr schema.GroupVersionResource, subresource, ns, name string) error {
	resource := gvr.Resource
	if subresource != "" {
		resource += "/" + subresource
	}
	for _, b := range r.bindings {
		if b.namespace != "" && b.namespace != ns || !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return subjectIs(s, user) }) {
			continue
		}
		for _, rule := range r.rules[b.role] {
			if matches(rule.Verbs, verb) && matches(rule.APIGroups, gvr.Group) && matches(rule.Resources, resource) &&
				(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)) {
				return nil
			}
		}
	}
	group := gvr.Group
	return apierrors.NewForbidden(gvr.GroupResource(), name, fmt.Errorf("User %q cannot %s resource %q in API group %q in the namespace %q", user, verb, resource, group, ns))
}

// matches reports whether a rule's list holds v or "*".
func matches(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, rbacv1.ResourceAll)
}

// subjectIs reports whether s names user ("system:serviceaccount:NS:NAME"),
// as the account, the user, or a group every service account (of NS) is in.
func subjectIs(s rbacv1.Subject, user string) bool {
	ns, name, isAccount := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	isAccount = isAccount && strings.HasPrefix(user, "system:serviceaccount:")
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		return isAccount && s.Namespace == ns && s.Name == name
	case rbacv1.UserKind:
		return s.Name == user
	case rbacv1.GroupKind:
		return s.Name == "system:authenticated" || isAccount && (s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+ns)
	}
	return false
}
