package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/kinds"
)

// ChildKind is one entry of a config entry's children list: a kind its
// templates may render.
type ChildKind struct {
	// APIVersion is the child's apiVersion, e.g. policy/v1.
	APIVersion string `json:"apiVersion"`
	// Kind is the child's kind, e.g. PodDisruptionBudget.
	Kind string `json:"kind"`
	// Resource is the lowercase plural. It is needed only for kinds outside
	// stencil's table of built-in kinds (a custom resource of another
	// operator), so that "stencil rbac" can name it without a cluster.
	Resource string `json:"resource,omitempty"`
}

// Describe words a child kind for type errors: its required fields.
func (ChildKind) Describe() (one, many string) {
	names := "{" + strings.Join(decode.FieldNames(reflect.TypeFor[ChildKind](), true), ", ") + "}"
	return "a mapping " + names, names
}

// GVK returns the child kind's GroupVersionKind.
func (k ChildKind) GVK() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(k.APIVersion)
	return gv.WithKind(k.Kind)
}

// DefaultChildren are the kinds an entry without a children list renders.
var DefaultChildren = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Version: "v1", Kind: "Service"},
}

// ChildGVKs returns the kinds the entry's templates may render: its
// children list, or DefaultChildren.
func (r Resource) ChildGVKs() []schema.GroupVersionKind {
	if len(r.Children) == 0 {
		return slices.Clone(DefaultChildren)
	}
	out := make([]schema.GroupVersionKind, 0, len(r.Children))
	for _, c := range r.Children {
		out = append(out, c.GVK())
	}
	return out
}

// ChildResource returns the resource (plural) of a child kind: from the
// entry's children list when it names one, else from the table of built-in
// kinds (package config/kinds).
func (r Resource) ChildResource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	for _, c := range r.Children {
		if c.GVK() == gvk && c.Resource != "" {
			return gvk.GroupVersion().WithResource(c.Resource), true
		}
	}
	res, ok := kinds.Resource(gvk.GroupKind())
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	return gvk.GroupVersion().WithResource(res), true
}

// validateChildren checks an entry's children list, at p: each kind is
// well formed, listed once, namespaced, and, if it grants permissions,
// allowed explicitly.
func validateChildren(r Resource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[schema.GroupVersionKind]int{}
	for j, c := range r.Children {
		cp := p.Index(j)
		if c.APIVersion == "" || c.Kind == "" {
			errs = append(errs, field.Required(cp, "apiVersion and kind are required, e.g. {apiVersion: policy/v1, kind: PodDisruptionBudget}"))
			continue
		}
		if _, err := schema.ParseGroupVersion(c.APIVersion); err != nil {
			errs = append(errs, field.Invalid(cp.Child("apiVersion"), c.APIVersion, fmt.Sprintf("%q: %v", c.APIVersion, err)))
			continue
		}
		gvk := c.GVK()
		if k, dup := seen[gvk]; dup {
			errs = append(errs, field.Invalid(cp, c.Kind, fmt.Sprintf("%s is also children[%d]", c.Kind, k)))
			continue
		}
		seen[gvk] = j
		switch gk := gvk.GroupKind(); {
		case kinds.IsClusterScoped(gk):
			errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s is cluster-scoped: children live in their custom resource's namespace", gk)))
		case kinds.GrantsPermissions(gk) && !r.AllowPermissionGrants:
			errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s grants permissions: anyone who may create a %s could escalate through stencil; set allowPermissionGrants: true on the entry to allow it", gk, r.Resource)))
		}
		if c.Resource != "" && strings.ToLower(c.Resource) != c.Resource {
			errs = append(errs, field.Invalid(cp.Child("resource"), c.Resource, fmt.Sprintf("%q must be the lowercase plural", c.Resource)))
		}
	}
	return errs
}
