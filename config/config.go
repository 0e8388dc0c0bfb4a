// Package config reads the stencil config file: which GroupVersionResources
// to watch, which templates (or which chart) render their children, and how
// (readiness checks, render budgets, rollouts); helm-operator's watches.yaml
// is read into the same entries.
//
// The design choice a newcomer may question: every resource is named by its
// lowercase plural exactly as the CRD spells it, and nothing here ever derives
// a plural from a Kind. Guessing plurals ("Memcached" -> "memcacheds"?
// "Policy" -> "policys"?) is wrong often enough that a config naming the
// wrong resource must fail at load time, not at the first watch.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config is the parsed and validated stencil config file.
type Config struct {
	// Path is the config file as given on the command line.
	Path string `json:"-"`
	// Dir is the directory that relative template paths are resolved against.
	Dir string `json:"-"`
	// Resources lists the watched resources in file order.
	Resources []Resource `json:"resources"`
}

// Resource is one entry of the config: a GVR to watch and its templates.
type Resource struct {
	// Group is the API group; empty means the core group.
	Group string `json:"group"`
	// Version is the API version served for the resource, e.g. v1beta1.
	Version string `json:"version"`
	// Resource is the lowercase plural as in the CRD, e.g. webapps.
	Resource string `json:"resource"`
	// Templates are the child templates, relative to the config file, in
	// file order; each may wait for others (dependencies.go).
	Templates []Template `json:"templates"`
	// StatusTemplate optionally renders extra fields merged under .status.
	StatusTemplate string `json:"statusTemplate,omitempty"`
	// Helpers are files of {{ define }} blocks the entry's templates share
	// through include and template, relative to the config file; they
	// render nothing themselves.
	Helpers []string `json:"helpers,omitempty"`
	// Namespaces limits the watch; empty means all namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// Selector is a label selector on the custom resources; empty selects all.
	Selector string `json:"selector,omitempty"`
	// Children are the child kinds the templates may render, exactly;
	// empty means Deployment and Service (DefaultChildren).
	Children []ChildKind `json:"children,omitempty"`
	// AllowPermissionGrants lets Children list kinds that grant
	// permissions (Role, RoleBinding); "stencil validate" warns about it.
	AllowPermissionGrants bool `json:"allowPermissionGrants,omitempty"`
	// TenantTemplates lets template text in a chart entry's custom
	// resources run where the chart passes it to tpl; without it, that
	// text is printed as the literal text it is (docs/charts.md).
	TenantTemplates bool `json:"tenantTemplates,omitempty"`
	// Rollout, when set, moves existing resources to a changed render a
	// few at a time and halts on failure (rollout.go); nil moves them all
	// at once.
	Rollout *Rollout `json:"rollout,omitempty"`
	// RenderBudget raises the bounds of one render's work (budget.go);
	// nil keeps DefaultRenderBudget.
	RenderBudget *RenderBudget `json:"renderBudget,omitempty"`
	// Chart, instead of templates, is a Helm chart (a directory or .tgz,
	// relative to the config file) that renders the children (chart.go).
	Chart string `json:"chart,omitempty"`
	// OverrideValues are written over the resource's spec before the
	// chart renders it: --set paths to values, helm-operator's meaning.
	OverrideValues map[string]string `json:"overrideValues,omitempty"`
	// ChildrenFromChart says Children were read from the chart's
	// templates, not from the config.
	ChildrenFromChart bool `json:"-"`
}

// GVR returns the entry's GroupVersionResource.
func (r Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// String names the entry the way kubectl does, e.g. webapps.v1beta1.apps.example.com.
func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource + "." + r.Version
	}
	return r.Resource + "." + r.Version + "." + r.Group
}

// LabelSelector returns the parsed Selector, or labels.Everything() when it is
// empty. Load has already rejected selectors that do not parse; for a Resource
// built by hand with a bad selector it returns labels.Nothing(), so a typo
// never widens the watch.
func (r Resource) LabelSelector() labels.Selector {
	if r.Selector == "" {
		return labels.Everything()
	}
	sel, err := labels.Parse(r.Selector)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// TemplatePath resolves a template path from the config against c.Dir.
func (c *Config) TemplatePath(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(c.Dir, filepath.FromSlash(name))
}

// FieldError is one problem found in a config file. Its message names the
// file, the entry and the field, e.g.
// "stencil.yaml: resources[1] (memcacheds.v1alpha1.cache.example.com): templates[0]: ...".
type FieldError struct {
	// File is the config file as given.
	File string
	// Entry names the resources entry, empty for problems outside any entry.
	Entry string
	// Field is the field path inside the entry, e.g. templates[0].
	Field string
	// Err is the problem itself.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	var b strings.Builder
	for _, s := range []string{e.File, e.Entry, e.Field} {
		if s != "" {
			b.WriteString(s)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// EntryName names resources[i] for error messages, with its GVR when known.
func EntryName(i int, r Resource) string {
	if r.Resource == "" || r.Version == "" {
		return fmt.Sprintf("resources[%d]", i)
	}
	return fmt.Sprintf("resources[%d] (%s)", i, r)
}

// Load reads, strictly decodes and validates the config file at path. It
// returns every problem it finds, joined, each naming file, entry and field.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig is Load for a config already in memory; template paths are
// still checked on disk, relative to filepath.Dir(path).
func ParseConfig(path string, data []byte) (*Config, error) {
	cfg := &Config{Path: path, Dir: filepath.Dir(path)}
	d := &decoder{file: path, badFields: map[int]map[string]bool{}}
	d.decode(cfg, data)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	// The walk accepted the document; decode it once more with the strict
	// decoder so the struct tags, not the walk, are the source of truth.
	var strict Config
	if err := yaml.UnmarshalStrict(data, &strict); err != nil {
		return nil, &FieldError{File: path, Err: err}
	}
	// overrideValues expand $VAR from the environment as helm-operator
	// does: the walk expanded them, so the strict decode must too.
	for i, r := range strict.Resources {
		for k, v := range r.OverrideValues {
			strict.Resources[i].OverrideValues[k] = os.ExpandEnv(v)
		}
	}
	if !equalResources(strict.Resources, cfg.Resources) {
		return nil, &FieldError{File: path, Err: errors.New("internal error: strict decode disagrees with validation")}
	}
	return cfg, nil
}

// decoder walks the generic form of the document so that it can report every
// unknown field and type error, not just the first one encoding/json meets.
type decoder struct {
	file string
	errs []error
	// badFields[i][field] is set when resources[i].field failed to decode,
	// so validation does not report it a second time.
	badFields map[int]map[string]bool
}

// unknownFields reports every key of m that known does not list, each
// under prefix (e.g. "rollout."), and whether there was none.
func (d *decoder) unknownFields(entry, prefix string, m map[string]any, known []string) bool {
	ok := true
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			d.addf(entry, prefix+k, "unknown field %q (known: %s)", k, strings.Join(known, ", "))
			ok = false
		}
	}
	return ok
}

func (d *decoder) markBad(i int, field string) {
	if d.badFields[i] == nil {
		d.badFields[i] = map[string]bool{}
	}
	d.badFields[i][field] = true
}

func (d *decoder) add(entry, field string, err error) {
	d.errs = append(d.errs, &FieldError{File: d.file, Entry: entry, Field: field, Err: err})
}

func (d *decoder) addf(entry, field, format string, args ...any) {
	d.add(entry, field, fmt.Errorf(format, args...))
}

var resourceFields = []string{"group", "version", "resource", "templates", "statusTemplate", "helpers", "namespaces", "selector", "children", "allowPermissionGrants", "rollout", "renderBudget", "chart", "overrideValues", "tenantTemplates"}

func (d *decoder) decode(cfg *Config, data []byte) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		d.add("", "", fmt.Errorf("not valid YAML: %w", err))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		d.add("", "", fmt.Errorf("not valid YAML: %w", err))
		return
	}
	if doc == nil {
		d.add("", "resources", errors.New("at least one resource is required (the file is empty)"))
		return
	}
	top, ok := doc.(map[string]any)
	if !ok {
		d.addf("", "", "top level must be a mapping with a resources list, not %s", jsonType(doc))
		return
	}
	for _, k := range sortedKeys(top) {
		if k != "resources" {
			d.addf("", k, "unknown field %q (known: resources)", k)
		}
	}
	raw, ok := top["resources"]
	if !ok || raw == nil {
		d.add("", "resources", errors.New("at least one resource is required"))
		return
	}
	list, ok := raw.([]any)
	if !ok {
		d.addf("", "resources", "must be a list, not %s", jsonType(raw))
		return
	}
	if len(list) == 0 {
		d.add("", "resources", errors.New("at least one resource is required"))
		return
	}
	cfg.Resources = make([]Resource, len(list))
	seen := map[schema.GroupResource]int{}
	for i, item := range list {
		cfg.Resources[i] = d.decodeResource(i, item)
		cfg.validateEntry(d, i, cfg.Resources[i], seen)
	}
}

func (d *decoder) decodeResource(i int, item any) Resource {
	var r Resource
	m, ok := item.(map[string]any)
	if !ok {
		d.addf(fmt.Sprintf("resources[%d]", i), "", "must be a mapping, not %s", jsonType(item))
		d.markBad(i, "*")
		return r
	}
	// Read the identifying fields first so every later message can name the GVR.
	r.Group, _ = m["group"].(string)
	r.Version, _ = m["version"].(string)
	r.Resource, _ = m["resource"].(string)
	entry := EntryName(i, r)

	d.unknownFields(entry, "", m, resourceFields)
	str := func(field string) string {
		v, ok := m[field]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			d.addf(entry, field, "must be a string, not %s", jsonType(v))
			d.markBad(i, field)
		}
		return s
	}
	strs := func(field string) []string {
		v, ok := m[field]
		if !ok || v == nil {
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			d.addf(entry, field, "must be a list of strings, not %s", jsonType(v))
			d.markBad(i, field)
			return nil
		}
		out := make([]string, 0, len(l))
		for j, e := range l {
			s, ok := e.(string)
			if !ok {
				d.addf(entry, fmt.Sprintf("%s[%d]", field, j), "must be a string, not %s", jsonType(e))
				d.markBad(i, field)
				continue
			}
			out = append(out, s)
		}
		return out
	}
	r.Group = str("group")
	r.Version = str("version")
	r.Resource = str("resource")
	r.Templates = d.decodeTemplates(i, entry, m["templates"])
	r.StatusTemplate = str("statusTemplate")
	r.Helpers = strs("helpers")
	r.Namespaces = strs("namespaces")
	r.Selector = str("selector")
	r.Children = d.decodeChildren(i, entry, m["children"])
	r.Rollout = d.decodeRollout(i, entry, m["rollout"])
	r.RenderBudget = d.decodeRenderBudget(i, entry, m["renderBudget"])
	r.Chart = str("chart")
	r.OverrideValues = d.decodeOverrides(i, entry, m["overrideValues"])
	r.AllowPermissionGrants = d.decodeBool(i, entry, m, "allowPermissionGrants")
	r.TenantTemplates = d.decodeBool(i, entry, m, "tenantTemplates")
	return r
}

// decodeBool reads an entry's boolean field name (absent: false).
func (d *decoder) decodeBool(i int, entry string, m map[string]any, name string) bool {
	v, ok := m[name]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		d.addf(entry, name, "must be true or false, not %s", jsonType(v))
		d.markBad(i, name)
	}
	return b
}

// validateEntry checks resources[i] (and, through seen, that its GroupResource is new)
// right after it is decoded, so errors come out grouped by entry. Fields that
// failed to decode are not checked again.
func (c *Config) validateEntry(d *decoder, i int, r Resource, seen map[schema.GroupResource]int) {
	entry := EntryName(i, r)
	bad := d.badFields[i]
	if bad["*"] {
		return
	}
	if r.Group != "" && !bad["group"] {
		for _, msg := range validation.IsDNS1123Subdomain(r.Group) {
			d.addf(entry, "group", "%q is not a valid API group: %s", r.Group, msg)
		}
	}
	switch {
	case bad["version"]:
	case r.Version == "":
		d.add(entry, "version", errors.New("is required, e.g. v1"))
	default:
		for _, msg := range validation.IsDNS1123Label(r.Version) {
			d.addf(entry, "version", "%q is not a valid API version: %s", r.Version, msg)
		}
	}
	switch {
	case bad["resource"]:
	case r.Resource == "":
		d.add(entry, "resource", errors.New("is required: the lowercase plural as in the CRD, e.g. webapps"))
	case strings.ToLower(r.Resource) != r.Resource:
		d.addf(entry, "resource", "%q: resource must be the lowercase plural as in the CRD, e.g. webapps", r.Resource)
	default:
		if msgs := validation.IsDNS1123Label(r.Resource); len(msgs) > 0 {
			d.addf(entry, "resource", "%q: resource must be the lowercase plural as in the CRD, e.g. webapps: %s", r.Resource, strings.Join(msgs, "; "))
		}
	}
	if r.Version != "" && r.Resource != "" && !bad["group"] && !bad["version"] && !bad["resource"] {
		// One entry per GroupResource, whatever the version: two entries
		// reconciling the same objects (a CRD served at v1beta1 and v1
		// during a version migration) with different templates would fight.
		if j, dup := seen[r.GVR().GroupResource()]; dup {
			d.addf(entry, "version", "%s is already configured by resources[%d] (%s): one entry per group and resource, whatever the version",
				r.GVR().GroupResource(), j, c.Resources[j].Version)
		} else {
			seen[r.GVR().GroupResource()] = i
		}
	}

	if r.Chart != "" && !bad["chart"] {
		chartErr := checkChart(c.TemplatePath(r.Chart))
		if chartErr != nil {
			d.add(entry, "chart", fmt.Errorf("%s: %w", r.Chart, chartErr))
		}
		for field, set := range map[string]bool{"templates": len(r.Templates) > 0, "statusTemplate": r.StatusTemplate != "", "helpers": len(r.Helpers) > 0} {
			if set {
				d.addf(entry, field, "an entry renders either a chart or templates, not both")
			}
		}
		if len(r.Children) == 0 && !bad["children"] && chartErr == nil {
			kinds, err := ChartKinds(c.TemplatePath(r.Chart), r.AllowPermissionGrants)
			if err != nil {
				d.add(entry, "chart", fmt.Errorf("%s: %w", r.Chart, err))
			} else {
				c.Resources[i].Children, c.Resources[i].ChildrenFromChart = kinds, true
				r = c.Resources[i]
				if len(kinds) == 0 {
					d.addf(entry, "chart", "%s: its templates name no namespaced kind to render", r.Chart)
				}
			}
		}
	} else {
		if r.OverrideValues != nil {
			d.add(entry, "overrideValues", errors.New("is for chart entries (chart: DIR)"))
		}
		if r.TenantTemplates {
			d.add(entry, "tenantTemplates", errors.New("is for chart entries (chart: DIR): stencil's own templates never run a tenant's text"))
		}
	}
	if len(r.Templates) == 0 && !bad["templates"] && r.Chart == "" {
		d.add(entry, "templates", errors.New("at least one template is required (or a chart)"))
	}
	firstUse := map[string]string{}
	checkFile := func(field, name string) {
		if name == "" {
			d.add(entry, field, errors.New("must not be empty"))
			return
		}
		if prev, dup := firstUse[name]; dup {
			d.addf(entry, field, "%s: duplicate of %s", name, prev)
			return
		}
		firstUse[name] = field
		if err := checkRegularFile(c.TemplatePath(name)); err != nil {
			d.add(entry, field, fmt.Errorf("%s: %w", name, err))
		}
	}
	for j, t := range r.Templates {
		field := fmt.Sprintf("templates[%d]", j)
		if t.ID != "" || len(t.DependsOn) > 0 || len(t.ReadyWhen) > 0 {
			field += ".path"
		}
		checkFile(field, t.Path)
	}
	if r.StatusTemplate != "" && !bad["statusTemplate"] {
		checkFile("statusTemplate", r.StatusTemplate)
	}
	if !bad["helpers"] {
		for j, h := range r.Helpers {
			checkFile(fmt.Sprintf("helpers[%d]", j), h)
		}
	}

	if !bad["children"] {
		d.validateChildren(entry, r)
		if !bad["templates"] {
			d.validateTemplates(entry, r)
		}
	}
	if r.Selector != "" && !bad["selector"] {
		if _, err := labels.Parse(r.Selector); err != nil {
			d.add(entry, "selector", fmt.Errorf("%q: %w", r.Selector, err))
		}
	}
	if bad["namespaces"] {
		return
	}
	nsSeen := map[string]int{}
	for j, ns := range r.Namespaces {
		field := fmt.Sprintf("namespaces[%d]", j)
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			d.addf(entry, field, "%q is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))
			continue
		}
		if k, dup := nsSeen[ns]; dup {
			d.addf(entry, field, "%q: duplicate of namespaces[%d]", ns, k)
			continue
		}
		nsSeen[ns] = j
	}
}

// missingFileError says a configured file is not there; it unwraps to the
// os error so errors.Is(err, fs.ErrNotExist) holds.
type missingFileError struct {
	resolved string
	err      error
}

// Error implements error.
func (e *missingFileError) Error() string {
	return fmt.Sprintf("no such file (looked for %s)", e.resolved)
}

// Unwrap returns the os error.
func (e *missingFileError) Unwrap() error { return e.err }

func checkRegularFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &missingFileError{resolved: path, err: err}
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

func equalResources(a, b []Resource) bool {
	return slices.EqualFunc(a, b, func(x, y Resource) bool {
		return x.Group == y.Group && x.Version == y.Version && x.Resource == y.Resource &&
			x.StatusTemplate == y.StatusTemplate && x.Selector == y.Selector &&
			reflect.DeepEqual(x.Templates, y.Templates) && slices.Equal(x.Helpers, y.Helpers) &&
			slices.Equal(x.Namespaces, y.Namespaces) && x.Chart == y.Chart && reflect.DeepEqual(x.OverrideValues, y.OverrideValues) && reflect.DeepEqual(x.Rollout, y.Rollout) && reflect.DeepEqual(x.RenderBudget, y.RenderBudget) &&
			x.AllowPermissionGrants == y.AllowPermissionGrants && x.TenantTemplates == y.TenantTemplates
	})
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, int64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
}
