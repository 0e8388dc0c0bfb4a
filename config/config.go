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
	d := &decoder{file: path, skip: pathSet{}}
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
	// skip holds the paths that failed to decode, so validation does not
	// report them a second time.
	skip pathSet
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
	p := fmt.Sprintf("resources[%d]", i)
	if field != "*" {
		p += "." + field
	}
	d.skip[p] = true
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
	label := func(i int) string { return EntryName(i, cfg.Resources[i]) }
	for i, item := range list {
		cfg.Resources[i] = d.decodeResource(i, item)
		errs := validateEntry(cfg, i, seen, d.skip)
		errs = append(errs, completeEntry(cfg, i, pathsOf(errs))...)
		for _, e := range errs {
			d.errs = append(d.errs, newFieldError(d.file, label, e))
		}
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
				d.markBad(i, fmt.Sprintf("%s[%d]", field, j))
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
