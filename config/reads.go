package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/kinds"
	"stencil.dev/stencil/config/readtemplate"
)

// Reading what the resource does not own (DESIGN.md, "reads"): an entry
// declares the objects its templates may read, by a fixed name, a name
// computed from the resource, or a label selector. The platform declares
// them; nothing else is readable. Here they are decoded and checked, and
// the computed names parsed (package config/readtemplate), once per load
// (Config.ReadTemplate); the templates package runs them, the controller
// watches what they resolve to.

// Read is one item of an entry's reads list.
type Read struct {
	// Name is the handle templates read it by: (read "defaults").
	Name string `json:"name"`
	// APIVersion and Kind are the read object's type.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resource is the lowercase plural, needed only for kinds outside
	// stencil's table of built-in kinds ("stencil rbac" names it offline).
	Resource string `json:"resource,omitempty"`
	// ObjectName names one object: fixed, or a template over the resource
	// ({{ .Spec.passwordSecret }}), which then reads in the resource's own
	// namespace only.
	ObjectName string `json:"objectName,omitempty"`
	// Namespace, with a fixed ObjectName, is where the object lives;
	// empty means the resource's own namespace.
	Namespace string `json:"namespace,omitempty"`
	// Selector, instead of ObjectName, reads a list (sorted by name) of
	// the objects in the resource's namespace whose labels match; each
	// value may be a template over the resource.
	Selector *ReadSelector `json:"selector,omitempty"`
	// Required makes the resource wait (WaitingForRead) while the object
	// does not exist: nothing is written or pruned.
	Required bool `json:"required,omitempty"`
	// SecretData, on a Secret read, lets templates see the Secret's data;
	// without it they see its existence, type and key names only.
	SecretData bool `json:"secretData,omitempty"`
}

// ReadSelector is a read's label selector.
type ReadSelector struct {
	// MatchLabels are the labels an object must carry; a value may be a
	// template over the resource.
	MatchLabels map[string]string `json:"matchLabels"`
}

// Describe words a read for type errors: its required fields.
func (Read) Describe() (one, many string) {
	names := "{" + strings.Join(decode.FieldNames(reflect.TypeFor[Read](), true), ", ") + "}"
	return "a mapping " + names, names
}

// GVK returns the read object's GroupVersionKind.
func (r Read) GVK() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithKind(r.Kind)
}

// Computed reports whether the read's name or selector is a template
// over the resource: then it reads in the resource's namespace only.
func (r Read) Computed() bool {
	if r.Selector != nil {
		for _, v := range r.Selector.MatchLabels {
			if IsTemplate(v) {
				return true
			}
		}
		return false
	}
	return IsTemplate(r.ObjectName)
}

// Fixed reports whether the read names one object the platform fixes:
// stencil may then watch that object alone.
func (r Read) Fixed() bool { return r.Selector == nil && !IsTemplate(r.ObjectName) }

// IsSecret reports whether the read is of core Secrets.
func (r Read) IsSecret() bool {
	gvk := r.GVK()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// ReadResource returns the resource (plural) of a read: its own resource
// field, else the table of built-in kinds, else the kind of one of
// entries (a configured resource with a schema).
func ReadResource(rd Read, entries []Resource) (schema.GroupVersionResource, bool) {
	gvk := rd.GVK()
	if rd.Resource != "" {
		return gvk.GroupVersion().WithResource(rd.Resource), true
	}
	if res, ok := kinds.Resource(gvk.GroupKind()); ok {
		return gvk.GroupVersion().WithResource(res), true
	}
	for _, e := range entries {
		if e.Kind == gvk.Kind && e.Group == gvk.Group {
			return gvk.GroupVersion().WithResource(e.Resource), true
		}
	}
	return schema.GroupVersionResource{}, false
}

// IsTemplate reports whether s holds a template action.
func IsTemplate(s string) bool { return strings.Contains(s, "{{") }

// readHandle is what a handle may be: short, a word, usable in messages
// and status without quoting.
var readHandle = regexp.MustCompile(`^[a-z][a-zA-Z0-9_-]{0,62}$`)

// ReadTemplate returns the parsed template of resources[i]'s computed
// read name or label value at path, under the entry
// ("reads[1].objectName", "reads[2].selector.matchLabels[tier]"), as
// this load's validation parsed it; false when it parsed none there (a
// fixed value, or a config that was not validated: Decode).
func (c *Config) ReadTemplate(i int, path string) (*template.Template, bool) {
	t, ok := c.readTemplates[field.NewPath("resources").Index(i).String()+"."+path]
	return t, ok
}

// validateReads checks an entry's reads list, at p: each handle is a word
// used once, the kind is namespaced, exactly one of objectName and
// selector is set, a namespace goes only with a fixed name, and every
// template parses (kept in c for the compile).
func validateReads(c *Config, reads []Read, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for j, rd := range reads {
		rp := p.Index(j)
		if skip.under(rp) {
			continue
		}
		if !readHandle.MatchString(rd.Name) {
			errs = append(errs, field.Invalid(rp.Child("name"), rd.Name, fmt.Sprintf("%q: a read's name is the handle templates use, (read \"defaults\"): a lowercase letter, then letters, digits, - or _", rd.Name)))
		} else if k, dup := seen[rd.Name]; dup {
			errs = append(errs, field.Duplicate(rp.Child("name"), fmt.Sprintf("%s (also reads[%d])", rd.Name, k)))
		} else {
			seen[rd.Name] = j
		}
		if rd.APIVersion == "" || rd.Kind == "" {
			errs = append(errs, field.Required(rp, "apiVersion and kind are required, e.g. {apiVersion: v1, kind: ConfigMap}"))
		} else if _, err := schema.ParseGroupVersion(rd.APIVersion); err != nil {
			errs = append(errs, field.Invalid(rp.Child("apiVersion"), rd.APIVersion, fmt.Sprintf("%q: %v", rd.APIVersion, err)))
		} else if kinds.IsClusterScoped(rd.GVK().GroupKind()) {
			errs = append(errs, field.Forbidden(rp.Child("kind"), fmt.Sprintf("%s is cluster-scoped: a read is of namespaced objects", rd.GVK().GroupKind())))
		}
		if rd.Resource != "" && strings.ToLower(rd.Resource) != rd.Resource {
			errs = append(errs, field.Invalid(rp.Child("resource"), rd.Resource, fmt.Sprintf("%q must be the lowercase plural", rd.Resource)))
		}
		errs = append(errs, c.validateReadTarget(rd, rp)...)
		if rd.SecretData && !rd.IsSecret() {
			errs = append(errs, field.Invalid(rp.Child("secretData"), true, "is for reads of Secrets (apiVersion: v1, kind: Secret)"))
		}
	}
	return errs
}

// validateReadTarget checks what a read names: one object or a selector,
// and where.
func (c *Config) validateReadTarget(rd Read, rp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case rd.ObjectName != "" && rd.Selector != nil:
		return field.ErrorList{field.Invalid(rp, rd.Name, "needs objectName or selector, not both: a read is one object or a list")}
	case rd.ObjectName == "" && rd.Selector == nil:
		return field.ErrorList{field.Required(rp.Child("objectName"), "a read names one object (objectName) or a list (selector: {matchLabels: ...})")}
	case rd.Selector != nil:
		if len(rd.Selector.MatchLabels) == 0 {
			errs = append(errs, field.Required(rp.Child("selector", "matchLabels"), "a selector needs at least one label: a read never lists every object of a kind"))
		}
		for _, k := range slices.Sorted(maps.Keys(rd.Selector.MatchLabels)) {
			v, vp := rd.Selector.MatchLabels[k], rp.Child("selector", "matchLabels").Key(k)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, field.Invalid(vp, k, fmt.Sprintf("%q is not a label key: %s", k, strings.Join(msgs, "; "))))
			}
			if IsTemplate(v) {
				errs = append(errs, c.parseReadTemplate(vp, v)...)
			} else if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				errs = append(errs, field.Invalid(vp, v, fmt.Sprintf("%q is not a label value: %s", v, strings.Join(msgs, "; "))))
			}
		}
		if rd.Namespace != "" && !IsTemplate(rd.Namespace) {
			errs = append(errs, field.Forbidden(rp.Child("namespace"), "a selector reads in the resource's own namespace; namespace goes with a fixed objectName"))
		}
	case IsTemplate(rd.ObjectName):
		errs = append(errs, c.parseReadTemplate(rp.Child("objectName"), rd.ObjectName)...)
		if rd.Namespace != "" && !IsTemplate(rd.Namespace) {
			errs = append(errs, field.Forbidden(rp.Child("namespace"), "a name computed from the resource reads in the resource's own namespace only: a tenant must not point a read at another namespace"))
		}
	default:
		if msgs := validation.IsDNS1123Subdomain(rd.ObjectName); len(msgs) > 0 {
			errs = append(errs, field.Invalid(rp.Child("objectName"), rd.ObjectName, fmt.Sprintf("%q is not an object name: %s", rd.ObjectName, strings.Join(msgs, "; "))))
		}
	}
	if rd.Namespace != "" && IsTemplate(rd.Namespace) {
		errs = append(errs, field.Forbidden(rp.Child("namespace"), "a namespace is fixed by the platform, never computed: a tenant must not point a read at another namespace"))
	} else if rd.Namespace != "" {
		if msgs := validation.IsDNS1123Label(rd.Namespace); len(msgs) > 0 {
			errs = append(errs, field.Invalid(rp.Child("namespace"), rd.Namespace, fmt.Sprintf("%q is not a namespace name: %s", rd.Namespace, strings.Join(msgs, "; "))))
		}
	}
	return errs
}

// parseReadTemplate parses a computed name or label value at p as a
// template of the bounded kind readtemplate.Parse takes, and keeps it for
// the compile (ReadTemplate). It is named by its path under the entry
// ("reads[0].objectName"), as the errors of running it say.
func (c *Config) parseReadTemplate(p *field.Path, text string) field.ErrorList {
	full := p.String()
	_, name, _ := strings.Cut(full, ".")
	t, err := readtemplate.Parse(name, text)
	if err != nil {
		return field.ErrorList{field.Invalid(p, text, err.Error())}
	}
	if c.readTemplates == nil {
		c.readTemplates = map[string]*template.Template{}
	}
	c.readTemplates[full] = t
	return nil
}
