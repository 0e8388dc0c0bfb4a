package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pathSet holds the paths of the fields that failed to decode, so that
// validation does not report them a second time.
type pathSet map[string]bool

// pathsOf returns the paths errs name.
func pathsOf(errs ...field.ErrorList) pathSet {
	s := pathSet{}
	for _, list := range errs {
		for _, e := range list {
			s[e.Field] = true
		}
	}
	return s
}

// at reports whether p, or a field p is part of, failed to decode.
func (s pathSet) at(p *field.Path) bool {
	ps := p.String()
	for e := range s {
		if within(ps, e) {
			return true
		}
	}
	return false
}

// under reports whether p, or any field inside it, failed to decode.
func (s pathSet) under(p *field.Path) bool {
	ps := p.String()
	for e := range s {
		if within(e, ps) {
			return true
		}
	}
	return false
}

// within reports whether path is outer or a field inside it.
func within(path, outer string) bool {
	rest, ok := strings.CutPrefix(path, outer)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// validateEntry checks resources[i] of c; seen holds the GroupResources of
// the entries before it. It reads files but changes nothing. A check that
// needs other fields (dependsOn needs the ids) runs only when they
// decoded.
func validateEntry(c *Config, i int, seen map[schema.GroupResource]int, skip pathSet) field.ErrorList {
	p := field.NewPath("resources").Index(i)
	if skip.at(p) {
		return nil
	}
	r := c.Resources[i]
	errs := validateGVR(r, p, skip)
	errs = append(errs, validateUnique(c, i, seen, skip)...)
	errs = append(errs, validateSource(r, c.TemplatePath, p, skip)...)
	errs = append(errs, validateFiles(r, c.TemplatePath, p, skip)...)
	if !skip.under(p.Child("children")) {
		errs = append(errs, validateChildren(r, p.Child("children"))...)
		if !skip.under(p.Child("templates")) {
			errs = append(errs, validateTemplates(r, p.Child("templates"))...)
		}
	}
	errs = append(errs, validateSelector(r.Selector, p.Child("selector"), skip)...)
	return append(errs, validateNamespaces(r.Namespaces, p.Child("namespaces"), skip)...)
}

// validateGVR checks group, version and resource.
func validateGVR(r Resource, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	if g := p.Child("group"); r.Group != "" && !skip.at(g) {
		for _, msg := range validation.IsDNS1123Subdomain(r.Group) {
			errs = append(errs, field.Invalid(g, r.Group, fmt.Sprintf("%q is not a valid API group: %s", r.Group, msg)))
		}
	}
	switch v := p.Child("version"); {
	case skip.at(v):
	case r.Version == "":
		errs = append(errs, field.Required(v, "is required, e.g. v1"))
	default:
		for _, msg := range validation.IsDNS1123Label(r.Version) {
			errs = append(errs, field.Invalid(v, r.Version, fmt.Sprintf("%q is not a valid API version: %s", r.Version, msg)))
		}
	}
	const plural = "resource must be the lowercase plural as in the CRD, e.g. webapps"
	switch res := p.Child("resource"); {
	case skip.at(res):
	case r.Resource == "":
		errs = append(errs, field.Required(res, "is required: the lowercase plural as in the CRD, e.g. webapps"))
	case strings.ToLower(r.Resource) != r.Resource:
		errs = append(errs, field.Invalid(res, r.Resource, fmt.Sprintf("%q: %s", r.Resource, plural)))
	default:
		if msgs := validation.IsDNS1123Label(r.Resource); len(msgs) > 0 {
			errs = append(errs, field.Invalid(res, r.Resource, fmt.Sprintf("%q: %s: %s", r.Resource, plural, strings.Join(msgs, "; "))))
		}
	}
	return errs
}

// validateUnique checks that resources[i] is the first entry of its
// GroupResource, whatever the version: two entries reconciling the same
// objects (a CRD served at v1beta1 and v1 during a version migration)
// with different templates would fight.
func validateUnique(c *Config, i int, seen map[schema.GroupResource]int, skip pathSet) field.ErrorList {
	r, p := c.Resources[i], field.NewPath("resources").Index(i)
	if r.Version == "" || r.Resource == "" || skip.at(p.Child("group")) || skip.at(p.Child("version")) || skip.at(p.Child("resource")) {
		return nil
	}
	gr := r.GVR().GroupResource()
	j, dup := seen[gr]
	if !dup {
		seen[gr] = i
		return nil
	}
	return field.ErrorList{field.Invalid(p.Child("version"), r.Version, fmt.Sprintf(
		"%s is already configured by resources[%d] (%s): one entry per group and resource, whatever the version", gr, j, c.Resources[j].Version))}
}

// validateSource checks that the entry renders a chart or templates, and
// that the fields of the one it does not render are unset.
func validateSource(r Resource, resolve func(string) string, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	if chart := p.Child("chart"); r.Chart != "" && !skip.at(chart) {
		if err := checkChart(resolve(r.Chart)); err != nil {
			errs = append(errs, fileError(chart, r.Chart, err))
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"templates", len(r.Templates) > 0}, {"statusTemplate", r.StatusTemplate != ""}, {"helpers", len(r.Helpers) > 0}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "an entry renders either a chart or templates, not both"))
			}
		}
		return errs
	}
	if r.OverrideValues != nil {
		errs = append(errs, field.Forbidden(p.Child("overrideValues"), "is for chart entries (chart: DIR)"))
	}
	if r.TenantTemplates {
		errs = append(errs, field.Forbidden(p.Child("tenantTemplates"), "is for chart entries (chart: DIR): stencil's own templates never run a tenant's text"))
	}
	if len(r.Templates) == 0 && !skip.under(p.Child("templates")) {
		errs = append(errs, field.Required(p.Child("templates"), "at least one template is required (or a chart)"))
	}
	return errs
}

// validateFiles checks that every file the entry names (templates, status
// template, helpers) is a regular file, named once.
func validateFiles(r Resource, resolve func(string) string, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	firstUse := map[string]string{}
	check := func(fp *field.Path, name string) {
		if skip.at(fp) {
			return
		}
		rel := strings.TrimPrefix(fp.String(), p.String()+".")
		prev, dup := firstUse[name]
		switch {
		case name == "":
			errs = append(errs, field.Required(fp, "must not be empty"))
		case dup:
			errs = append(errs, field.Duplicate(fp, name))
			errs[len(errs)-1].Detail = fmt.Sprintf("%s: duplicate of %s", name, prev)
		default:
			firstUse[name] = rel
			if err := checkRegularFile(resolve(name)); err != nil {
				errs = append(errs, fileError(fp, name, err))
			}
		}
	}
	for j, t := range r.Templates {
		fp := p.Child("templates").Index(j)
		if skip.at(fp.Child("path")) {
			continue
		}
		if t.ID != "" || len(t.DependsOn) > 0 || len(t.ReadyWhen) > 0 {
			fp = fp.Child("path")
		}
		check(fp, t.Path)
	}
	if r.StatusTemplate != "" {
		check(p.Child("statusTemplate"), r.StatusTemplate)
	}
	for j, h := range r.Helpers {
		check(p.Child("helpers").Index(j), h)
	}
	return errs
}

// validateSelector checks that a label selector parses.
func validateSelector(sel string, p *field.Path, skip pathSet) field.ErrorList {
	if sel == "" || skip.at(p) {
		return nil
	}
	if _, err := labels.Parse(sel); err != nil {
		return field.ErrorList{field.Invalid(p, sel, fmt.Sprintf("%q: %v", sel, err))}
	}
	return nil
}

// validateNamespaces checks that each namespace is a valid name, listed once.
func validateNamespaces(namespaces []string, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for j, ns := range namespaces {
		np := p.Index(j)
		if skip.at(np) {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(np, ns, fmt.Sprintf("%q is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))))
			continue
		}
		if k, dup := seen[ns]; dup {
			errs = append(errs, field.Invalid(np, ns, fmt.Sprintf("%q: duplicate of namespaces[%d]", ns, k)))
			continue
		}
		seen[ns] = j
	}
	return errs
}

// completeEntry fills in what resources[i] leaves to be read elsewhere:
// for a chart entry without a children list, the kinds its chart
// renders. It leaves alone an entry whose chart or children have errors.
func completeEntry(c *Config, i int, skip pathSet) field.ErrorList {
	r, p := &c.Resources[i], field.NewPath("resources").Index(i)
	chart := p.Child("chart")
	if r.Chart == "" || len(r.Children) > 0 || skip.at(p) || skip.under(chart) || skip.under(p.Child("children")) {
		return nil
	}
	kinds, err := ChartKinds(c.TemplatePath(r.Chart), r.AllowPermissionGrants)
	if err != nil {
		return field.ErrorList{field.Invalid(chart, r.Chart, fmt.Sprintf("%s: %v", r.Chart, err))}
	}
	if len(kinds) == 0 {
		return field.ErrorList{field.Invalid(chart, r.Chart, r.Chart+": its templates name no namespaced kind to render")}
	}
	r.Children, r.ChildrenFromChart = kinds, true
	return nil
}
