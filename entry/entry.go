// Package entry compiles a loaded config into the entries stencil runs:
// each chart loaded once, the child kinds a chart renders when the entry
// lists none, the CRD an entry's schema generates (package config/crd),
// what of a chart's schema that CRD cannot express, and overrideValues
// with $VAR expanded. Package templates parses an entry's templates (or
// prepares its chart) from the Entry; the controller, rbac, crd and
// manifests read the rest from it.
//
// The design choice a newcomer may question: package config only decodes
// and validates the file (each field against the others, each named file
// present), and everything that reads what a named file holds is here. A
// poll for changes, an editor's check and the render workers' handshake
// need the first and not the second; a chart was loaded four times per
// load when both lived in config, and every binary that loaded a config
// linked what compiling needs.
package entry

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/kinds"
)

// Entry is one entry of a config, compiled.
type Entry struct {
	// Resource is the entry as the config decodes it, with what the
	// compile fills in: Children read from the chart when the entry lists
	// none (ChildrenFromChart), OverrideValues with $VAR expanded. The
	// config itself is not changed.
	config.Resource
	// File is the config file; Index the entry's place in it; Label names
	// it in messages ("resources[0] (webapps.v1.example.com)").
	File  string
	Index int
	Label string
	// LoadedChart is the entry's chart as Helm loaded it, once; nil for a
	// template entry. Package templates rewrites a copy of it.
	LoadedChart *chartv2.Chart
	// ChildrenFromChart says Children were read from the chart's templates.
	ChildrenFromChart bool
	// CRD is the CRD the entry's schema generates; nil without a schema.
	CRD *apiextensionsv1.CustomResourceDefinition
	// SchemaNotes name what of the chart's values.schema.json the CRD
	// cannot express, left out of it.
	SchemaNotes []string
}

// chartLoads counts Helm chart loads, for the test that a compile loads
// each chart once.
var chartLoads atomic.Int64

// Compile compiles every entry of cfg, in config order. Errors name the
// file, the entry and the field, as the config's own do; all are returned.
func Compile(cfg *config.Config) ([]*Entry, error) {
	out := make([]*Entry, len(cfg.Resources))
	var errs field.ErrorList
	for i := range cfg.Resources {
		e, entryErrs := compile(cfg, i)
		out[i], errs = e, append(errs, entryErrs...)
	}
	if err := cfg.Errors(errs); err != nil {
		return nil, err
	}
	return out, nil
}

// CompileOne compiles cfg.Resources[i] alone.
func CompileOne(cfg *config.Config, i int) (*Entry, error) {
	e, errs := compile(cfg, i)
	if err := cfg.Errors(errs); err != nil {
		return nil, err
	}
	return e, nil
}

// compile compiles cfg.Resources[i]; error paths are under resources[i].
func compile(cfg *config.Config, i int) (*Entry, field.ErrorList) {
	r := cfg.Resources[i]
	e := &Entry{Resource: r, File: cfg.Path, Index: i, Label: cfg.EntryLabel(i)}
	p := field.NewPath("resources").Index(i)
	if len(r.OverrideValues) > 0 {
		// helm-operator expands $VAR in overrideValues from the
		// controller's environment.
		e.OverrideValues = make(config.Values, len(r.OverrideValues))
		for k, v := range r.OverrideValues {
			e.OverrideValues[k] = os.ExpandEnv(v)
		}
	}
	e.Children = slices.Clone(r.Children)
	if r.Chart != "" {
		ch, err := loadChart(cfg, cfg.TemplatePath(r.Chart))
		if err != nil {
			return nil, field.ErrorList{field.Invalid(p.Child("chart"), r.Chart, fmt.Sprintf("%s: %v", r.Chart, err))}
		}
		e.LoadedChart = ch
		if len(r.Children) == 0 {
			kinds := chartKinds(ch, r.AllowPermissionGrants)
			if len(kinds) == 0 {
				return nil, field.ErrorList{field.Invalid(p.Child("chart"), r.Chart, r.Chart+": its templates name no namespaced kind to render")}
			}
			e.Children, e.ChildrenFromChart = kinds, true
		}
	}
	if r.Schema != nil {
		if errs := e.buildCRD(p.Child("schema")); len(errs) > 0 {
			return nil, errs
		}
	}
	return e, nil
}

// loadChart loads the chart directory or archive at path with Helm's
// loader, from the config's snapshot (a directory is packed there as
// Helm's directory loader reads it).
func loadChart(cfg *config.Config, path string) (*chartv2.Chart, error) {
	chartLoads.Add(1)
	data, err := cfg.Snapshot().ChartArchive(path)
	if err != nil {
		return nil, err
	}
	loaded, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	ch, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("invalid chart apiVersion (charts of apiVersion v1 and v2 are served)")
	}
	return ch, nil
}

// Warnings lists what "stencil validate" points out although the config
// is valid: entries allowed to render kinds that grant permissions, and
// what of a chart's schema a generated CRD cannot express.
func Warnings(entries []*Entry) []string {
	var out []string
	for _, e := range entries {
		for j, k := range e.Children {
			if kinds.GrantsPermissions(k.GVK().GroupKind()) {
				// With an identity, the API server's escalation check is
				// made as the identity, not as stencil.
				whose := "stencil's own Role allows"
				if e.Identity != nil {
					whose = "the identity's role allows (" + e.Identity.String() + ")"
				}
				out = append(out, fmt.Sprintf("%s: %s: children[%d]: %s grants permissions: whoever may create a %s can grant, through stencil, what %s (allowPermissionGrants: true)",
					e.File, e.Label, j, k.GVK().GroupKind(), e.Resource.Resource, whose))
			}
		}
		for _, note := range e.SchemaNotes {
			out = append(out, fmt.Sprintf("%s: %s: schema: %s", e.File, e.Label, note))
		}
	}
	return out
}
