package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Identity is who an entry's children are written as: one ServiceAccount
// the platform fixes (ServiceAccount in Namespace), or the account Tenant
// in each custom resource's own namespace. Every write of a child
// impersonates it, so the API server checks the write against that
// account's RBAC; nil (no identity) writes as stencil's own account.
type Identity struct {
	// ServiceAccount and Namespace name one account for the whole entry.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	Namespace      string `json:"namespace,omitempty"`
	// Tenant names an account in the custom resource's namespace.
	Tenant string `json:"tenant,omitempty"`
}

// Describe words an identity for type errors.
func (Identity) Describe() (one, many string) {
	return "a mapping with serviceAccount and namespace, or tenant", "mappings"
}

// Account returns the namespace and name of the ServiceAccount the
// children of a custom resource in namespace ns are written as.
func (id *Identity) Account(ns string) (namespace, name string) {
	if id.Tenant != "" {
		return ns, id.Tenant
	}
	return id.Namespace, id.ServiceAccount
}

// User returns the user name the API server knows the account of a custom
// resource in namespace ns by: what a write impersonates.
func (id *Identity) User(ns string) string {
	namespace, name := id.Account(ns)
	return ServiceAccountUser(namespace, name)
}

// String names the identity as the config does, e.g. "tenant builder" or
// "serviceAccount stencil-system/webapp-writer".
func (id *Identity) String() string {
	if id.Tenant != "" {
		return "tenant " + id.Tenant
	}
	return "serviceAccount " + id.Namespace + "/" + id.ServiceAccount
}

// ServiceAccountUser is the user name of the ServiceAccount name in
// namespace ns: system:serviceaccount:NS:NAME.
func ServiceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}

// ParseDefaultIdentity reads the value of run's --default-identity:
// "tenant:NAME", the account NAME in each custom resource's namespace
// for every entry that names no identity.
func ParseDefaultIdentity(s string) (*Identity, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || kind != "tenant" {
		return nil, fmt.Errorf("%q: want tenant:NAME (the ServiceAccount NAME in each custom resource's namespace)", s)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, fmt.Errorf("%q: %q is not a valid ServiceAccount name: %s", s, name, strings.Join(msgs, "; "))
	}
	return &Identity{Tenant: name}, nil
}

// WithDefaultIdentity gives every entry of c that names no identity def
// (run --default-identity); nil leaves c as it is. It is applied once, as
// the config is loaded, so that every consumer (the writes, the role
// "stencil rbac" prints, a reload's access check) sees the same identity.
func (c *Config) WithDefaultIdentity(def *Identity) {
	if def == nil {
		return
	}
	for i := range c.Resources {
		if c.Resources[i].Identity == nil {
			c.Resources[i].Identity = def
		}
	}
}

// validateIdentity checks that an identity is exactly one of
// {serviceAccount, namespace} and {tenant}, with valid names.
func validateIdentity(id *Identity, p *field.Path, skip pathSet) field.ErrorList {
	if id == nil || skip.under(p) {
		return nil
	}
	const want = "must be {serviceAccount: NAME, namespace: NS} (one account for the entry) or {tenant: NAME} (the account NAME in each custom resource's namespace)"
	fixed := id.ServiceAccount != "" || id.Namespace != ""
	switch {
	case fixed && id.Tenant != "":
		return field.ErrorList{field.Invalid(p, id, "sets both tenant and serviceAccount/namespace: "+want)}
	case !fixed && id.Tenant == "":
		return field.ErrorList{field.Required(p, want)}
	}
	var errs field.ErrorList
	name := func(fp *field.Path, v, required string) {
		if v == "" {
			errs = append(errs, field.Required(fp, required))
			return
		}
		if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fp, v, fmt.Sprintf("%q is not a valid ServiceAccount name: %s", v, strings.Join(msgs, "; "))))
		}
	}
	if id.Tenant != "" {
		name(p.Child("tenant"), id.Tenant, "")
		return errs
	}
	name(p.Child("serviceAccount"), id.ServiceAccount, "is required with namespace: the name of the account")
	if ns := p.Child("namespace"); id.Namespace == "" {
		errs = append(errs, field.Required(ns, "is required with serviceAccount: the namespace of the account"))
	} else if msgs := validation.IsDNS1123Label(id.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(ns, id.Namespace, fmt.Sprintf("%q is not a valid namespace name: %s", id.Namespace, strings.Join(msgs, "; "))))
	}
	return errs
}
