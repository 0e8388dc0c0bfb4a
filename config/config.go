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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"text/template"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/snapshot"
)

// Config is the parsed and validated stencil config file.
type Config struct {
	// Path is the config file as given on the command line.
	Path string `json:"-"`
	// Dir is the directory that relative template paths are resolved against.
	Dir string `json:"-"`
	// Resources lists the watched resources in file order.
	Resources []Resource `json:"resources"`
	// label names resources[i] in messages (EntryLabel); nil names it
	// as EntryName does.
	label func(i int) string
	// snap holds every file the config names, as this load read them:
	// the compile reads them from it, never from disk.
	snap *snapshot.Snapshot
	// readTemplates are the computed read names and label values, by
	// field path, as validate parsed them: the compile takes them from
	// here (ReadTemplate), so that each is parsed once per load. Kept
	// beside Resources, not in Read, so that a Read stays plain data that
	// tests compare with reflect.DeepEqual.
	readTemplates map[string]*template.Template
}

// Snapshot is the files this config was loaded from (TakeSnapshot): what
// its compile and its render workers read.
func (c *Config) Snapshot() *snapshot.Snapshot { return c.snap }

// ReadFile returns a file the config names, from its snapshot.
func (c *Config) ReadFile(path string) ([]byte, error) {
	if c.snap == nil {
		return nil, fmt.Errorf("%s: the config was not loaded from a snapshot (config.Load, LoadSnapshot)", path)
	}
	return c.snap.ReadFile(path)
}

// EntryLabel names resources[i] in messages: "resources[0]
// (webapps.v1.example.com)", or, for a watches file, "watches[0]
// (example.com/v1, Kind=Hello)".
func (c *Config) EntryLabel(i int) string {
	if c.label != nil {
		return c.label(i)
	}
	return EntryName(i, c.Resources[i])
}

// Errors turns field errors found in c after it loaded (package entry
// compiles it) into one error, a *FieldError per line naming the file,
// the entry and the field; nil when errs is empty.
func (c *Config) Errors(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	sortByEntry(errs)
	return toErrors(c.Path, c.EntryLabel, errs)
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
	OverrideValues Values `json:"overrideValues,omitempty"`
	// TenantTemplates lets template text in a chart entry's custom
	// resources run where the chart passes it to tpl; without it, that
	// text is printed as the literal text it is (docs/charts.md).
	TenantTemplates bool `json:"tenantTemplates,omitempty"`
	// Kind, with a schema, is the kind of the generated CRD; ShortNames
	// and Categories are its kubectl names (api.go).
	Kind       string   `json:"kind,omitempty"`
	ShortNames []string `json:"shortNames,omitempty"`
	Categories []string `json:"categories,omitempty"`
	// Schema, when set, declares the entry's API: stencil generates its
	// CRD (api.go).
	Schema *Schema `json:"schema,omitempty"`
	// Reads are the objects the entry's templates may read without owning
	// them (reads.go); nothing else is readable.
	Reads []Read `json:"reads,omitempty"`
	// Identity, when set, is the account every child of the entry is
	// written as (identity.go); nil writes as stencil's own account.
	Identity *Identity `json:"identity,omitempty"`
}

// Values are an entry's overrideValues: --set paths to scalars, kept as
// the text helm-operator's strvals types.
type Values map[string]string

// DecodeJSON reads a mapping of scalars, each as its printed text.
func (v *Values) DecodeJSON(_ *decode.Decoder, raw json.RawMessage, p *field.Path) field.ErrorList {
	var m map[string]json.RawMessage
	if decode.Kind(raw) != "a mapping" || json.Unmarshal(raw, &m) != nil {
		return field.ErrorList{field.TypeInvalid(p, nil, "must be a mapping of --set paths to values, not "+decode.Kind(raw))}
	}
	*v = make(Values, len(m))
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		text, ok := decode.ScalarText(m[k])
		if !ok {
			errs = append(errs, field.TypeInvalid(p.Child(k), nil, "must be a scalar (a --set value), not "+decode.Kind(m[k])))
			continue
		}
		(*v)[k] = text
	}
	return errs
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
	snap, err := TakeSnapshot(path, false)
	if err != nil {
		return nil, err
	}
	return LoadSnapshot(snap, nil)
}

// ParseConfig is Load for a config already in memory; the files it names
// are read from disk, relative to filepath.Dir(path).
func ParseConfig(path string, data []byte) (*Config, error) {
	return LoadSnapshot(snapshotOf(path, false, data), nil)
}

// LoadSnapshot decodes and validates the config a snapshot holds (a
// watches file's entries resolved with resolve): every file check reads
// the snapshot, never the disk. The Config keeps the snapshot, from which
// its compile reads each template and chart.
func LoadSnapshot(snap *snapshot.Snapshot, resolve PluralResolver) (*Config, error) {
	if snap.Watches {
		return loadWatches(snap, resolve)
	}
	cfg, errs, set, err := decodeConfig(snap.Path, snap.Config)
	if err != nil {
		return nil, err
	}
	cfg.snap = snap
	errs = append(errs, validate(cfg, pathsOf(errs), set)...)
	if len(errs) > 0 {
		return nil, cfg.Errors(errs)
	}
	return cfg, nil
}

// Decode reads and decodes the config file at path without validating it:
// no file is looked at and no chart loaded, which is what a poll for
// changes needs. Its result is not fit to run.
func Decode(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, errs, _, err := decodeConfig(path, data)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, toErrors(path, func(i int) string { return EntryName(i, cfg.Resources[i]) }, errs)
	}
	return cfg, nil
}

// decodeConfig decodes data into a Config: the field errors it found and
// the paths the document sets, or an error when data is not a document.
func decodeConfig(path string, data []byte) (*Config, field.ErrorList, pathSet, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, nil, &FieldError{File: path, Err: fmt.Errorf("not valid YAML: %w", err)}
	}
	if decode.Kind(js) == "null" {
		return nil, nil, nil, &FieldError{File: path, Field: "resources", Err: errors.New("at least one resource is required (the file is empty)")}
	}
	cfg := &Config{Path: path, Dir: filepath.Dir(path)}
	d := &decode.Decoder{Set: pathSet{}}
	errs := d.Decode(js, reflect.ValueOf(cfg).Elem(), nil, "")
	return cfg, errs, d.Set, nil
}

// Describe words the top level for type errors.
func (Config) Describe() (one, many string) { return "a mapping with a resources list", "" }

// Describe words an entry for type errors.
func (Resource) Describe() (one, many string) { return "a mapping", "" }

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

// checkRegularFile says whether path is a regular file, as the config's
// snapshot found it.
func (c *Config) checkRegularFile(path string) error {
	f := c.snap.Stat(path)
	switch {
	case f.Missing:
		return &missingFileError{resolved: path, err: fs.ErrNotExist}
	case f.Err != "":
		return errors.New(f.Err)
	case f.Irregular || f.Dir:
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}
