package config

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/fieldpath"
)

// pathSet holds the paths of the fields that failed to decode, so that
// validation does not report them a second time.
type pathSet map[string]bool

// pathsOf returns the paths errs name; "" stands for the whole document.
func pathsOf(errs field.ErrorList) pathSet {
	s := pathSet{}
	for _, e := range errs {
		s[strings.TrimPrefix(e.Field, (*field.Path)(nil).String())] = true
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
	if outer == "" {
		return true
	}
	rest, ok := strings.CutPrefix(path, outer)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// validate checks a decoded config. skip holds the paths that failed to
// decode, set those the document sets. It reads files but changes nothing.
func validate(c *Config, skip, set pathSet) field.ErrorList {
	p := field.NewPath("resources")
	if len(c.Resources) == 0 {
		if skip.at(p) {
			return nil
		}
		return field.ErrorList{field.Required(p, "at least one resource is required")}
	}
	var errs field.ErrorList
	seen := map[schema.GroupResource]int{}
	for i := range c.Resources {
		errs = append(errs, validateEntry(c, i, seen, skip, set)...)
	}
	return errs
}

// validateEntry checks resources[i] of c; seen holds the GroupResources of
// the entries before it. A check that needs other fields (dependsOn needs
// the ids) runs only when they are sound.
func validateEntry(c *Config, i int, seen map[schema.GroupResource]int, skip, set pathSet) field.ErrorList {
	p := field.NewPath("resources").Index(i)
	if skip.at(p) {
		return nil
	}
	r := c.Resources[i]
	checks := validateReadyChecks(r.Templates, p.Child("templates"), skip)
	errs := append(checks, validateRollout(r.Rollout, p.Child("rollout"), skip)...)
	errs = append(errs, validateRenderBudget(r.RenderBudget, p.Child("renderBudget"), skip, set)...)
	errs = append(errs, validateGVR(r, p, skip)...)
	errs = append(errs, validateUnique(c, i, seen, skip)...)
	errs = append(errs, validateSource(r, c, p, skip)...)
	errs = append(errs, validateFiles(r, c, p, skip)...)
	if !skip.under(p.Child("children")) {
		errs = append(errs, validateChildren(r, p.Child("children"))...)
		if len(checks) == 0 && !skip.under(p.Child("templates")) {
			errs = append(errs, validateTemplates(r, p.Child("templates"))...)
		}
	}
	errs = append(errs, validateSelector(r.Selector, p.Child("selector"), skip)...)
	errs = append(errs, validateAPI(r, p, skip)...)
	errs = append(errs, validateReads(c, r.Reads, p.Child("reads"), skip)...)
	errs = append(errs, validateIdentity(r.Identity, p.Child("identity"), skip)...)
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
func validateSource(r Resource, c *Config, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	if chart := p.Child("chart"); r.Chart != "" && !skip.at(chart) {
		if err := c.checkChart(c.TemplatePath(r.Chart)); err != nil {
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
func validateFiles(r Resource, c *Config, p *field.Path, skip pathSet) field.ErrorList {
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
			if err := c.checkRegularFile(c.TemplatePath(name)); err != nil {
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

// validateRollout checks that each limit is at least 1, or a percentage
// from 1% to 100%.
func validateRollout(r *Rollout, p *field.Path, skip pathSet) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"maxInFlight", r.MaxInFlight}, {"maxFailed", r.MaxFailed}} {
		fp := p.Child(f.name)
		switch {
		case f.v == nil || skip.at(fp):
		case f.v.Type == intstr.Int && f.v.IntVal < 1:
			errs = append(errs, field.Invalid(fp, f.v.IntVal, fmt.Sprintf(`%d: must be a whole number of at least 1, or a percentage such as "25%%"`, f.v.IntVal)))
		case f.v.Type == intstr.String:
			pct, err := strconv.Atoi(strings.TrimSuffix(f.v.StrVal, "%"))
			if !strings.HasSuffix(f.v.StrVal, "%") || err != nil || pct < 1 || pct > 100 {
				errs = append(errs, field.Invalid(fp, f.v.StrVal, fmt.Sprintf("%q: must be a percentage from 1%% to 100%%, or a whole number of at least 1", f.v.StrVal)))
			}
		}
	}
	return errs
}

// validateRenderBudget checks that each bound the document sets is from 1
// to its maximum (renderBudgetMax).
func validateRenderBudget(b *RenderBudget, p *field.Path, skip, set pathSet) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	v, limit := reflect.ValueOf(*b), reflect.ValueOf(renderBudgetMax)
	for _, f := range decode.Fields(v.Type()) {
		fp := p.Child(f.Name)
		n, most := v.Field(f.Index).Int(), limit.Field(f.Index).Int()
		if set[fp.String()] && !skip.at(fp) && (n < 1 || n > most) {
			errs = append(errs, field.Invalid(fp, n, fmt.Sprintf("%d: must be a whole number from 1 to %d", n, most)))
		}
	}
	return errs
}

// validateReadyChecks checks every readyWhen check of templates, at p.
func validateReadyChecks(templates []Template, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	for j, t := range templates {
		for k, c := range t.ReadyWhen {
			if cp := p.Index(j).Child("readyWhen").Index(k); !skip.at(cp) {
				errs = append(errs, validateReadyCheck(c, cp, skip)...)
			}
		}
	}
	return errs
}

// validateReadyCheck checks that a check names a kind and has exactly one
// test, and that the field it reads, if any, is a field path.
func validateReadyCheck(c ReadyCheck, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	if cond := p.Child("condition"); c.Condition != nil && !skip.under(cond) &&
		(c.Condition.Type == "" || !slices.Contains([]string{"True", "False", "Unknown"}, c.Condition.Status)) {
		errs = append(errs, field.Invalid(cond, c.Condition, `must be {type: TYPE, status: "True" | "False" | "Unknown"}`))
	}
	if c.Kind == "" && !skip.at(p.Child("kind")) {
		errs = append(errs, field.Required(p.Child("kind"), "is required: the kind of this template's children the check applies to"))
	}
	// A test that failed to decode was still written: it counts.
	n := 0
	for _, set := range []bool{c.NonEmpty || skip.at(p.Child("nonEmpty")), c.Equals != nil || skip.at(p.Child("equals")), c.Condition != nil || skip.at(p.Child("condition"))} {
		if set {
			n++
		}
	}
	fp := p.Child("fieldPath")
	switch {
	case n != 1:
		errs = append(errs, field.Invalid(p, n, "needs exactly one of nonEmpty: true, equals or condition"))
	case skip.at(fp):
	case c.Condition == nil && !skip.at(p.Child("condition")):
		if _, err := fieldpath.Parse(c.FieldPath); err != nil {
			errs = append(errs, field.Invalid(fp, c.FieldPath, err.Error()))
		}
	case c.Condition != nil && c.FieldPath != "":
		errs = append(errs, field.Invalid(fp, c.FieldPath, "is not read by a condition check"))
	}
	return errs
}

// checkChart says whether path is a chart directory or archive, as the
// config's snapshot found it.
func (c *Config) checkChart(path string) error {
	f := c.snap.Stat(path)
	switch {
	case f.Missing:
		return &missingFileError{resolved: path, err: fs.ErrNotExist}
	case f.Err != "" && !f.Dir:
		return errors.New(f.Err)
	case f.Dir && f.NoChartYAML:
		return fmt.Errorf("%s is a directory without Chart.yaml", path)
	case f.Irregular:
		return fmt.Errorf("%s is neither a chart directory nor a .tgz", path)
	}
	return nil
}
