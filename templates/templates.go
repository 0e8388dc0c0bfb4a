// Package templates loads the Go templates named in the stencil config,
// with a small hermetic function map, and renders a custom resource into the
// unstructured children the controller applies.
//
// The design choice a newcomer may question: rendering does more than run
// text/template. It also enforces the child contract (allowed kinds only,
// the parent's namespace only, unique names) and stamps the controller
// ownerReference and the stencil labels itself, overriding whatever the
// template wrote. The templates are user input; the guarantees in DESIGN.md
// must not depend on every template author remembering them, and a template
// that breaks them fails here with a RenderError instead of at the API server.
package templates

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"text/template"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/gvr"
)

// Labels and values stencil stamps on every child.
const (
	// LabelManagedBy marks a child as written by stencil.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "stencil"
	// LabelOwnerUID holds the UID of the custom resource that owns a child.
	LabelOwnerUID = "stencil.dev/owner-uid"
)

// DefaultKinds are the child kinds a template may render when neither the
// config entry's children list nor Options says otherwise.
var DefaultKinds = gvr.DefaultChildren

// Options tunes Load.
type Options struct {
	// AllowedKinds are the child kinds templates may render when the config
	// entry lists no children; empty means DefaultKinds.
	AllowedKinds []schema.GroupVersionKind
}

// Set holds the parsed templates of one configured resource. It is safe for
// concurrent use.
type Set struct {
	res    gvr.Resource
	kinds  []schema.GroupVersionKind
	tmpls  []*template.Template
	status *template.Template
}

// Resource returns the config entry the set was loaded for.
func (s *Set) Resource() gvr.Resource { return s.res }

// Kinds returns the child kinds the set may render.
func (s *Set) Kinds() []schema.GroupVersionKind { return slices.Clone(s.kinds) }

// Load parses every template (and the status template) of res once. Template
// names are the paths as written in the config, so errors read
// "template: webapp/deployment.yaml.tmpl:12: ...". All errors are returned,
// joined, each prefixed with the config file and entry.
func Load(cfg *gvr.Config, res gvr.Resource, opts Options) (*Set, error) {
	entry := res.String()
	for i, r := range cfg.Resources {
		if r.GVR() == res.GVR() {
			entry = gvr.EntryName(i, r)
			break
		}
	}
	// The entry's children list decides; Options only when it has none.
	s := &Set{res: res, kinds: res.ChildGVKs()}
	if len(res.Children) == 0 && len(opts.AllowedKinds) > 0 {
		s.kinds = slices.Clone(opts.AllowedKinds)
	}
	var errs []error
	parse := func(field, name string) *template.Template {
		t, err := parseFile(cfg, name)
		if err != nil {
			errs = append(errs, &gvr.FieldError{File: cfg.Path, Entry: entry, Field: field, Err: err})
		}
		return t
	}
	for i, name := range res.Templates {
		s.tmpls = append(s.tmpls, parse(fmt.Sprintf("templates[%d]", i), name))
	}
	if res.StatusTemplate != "" {
		s.status = parse("statusTemplate", res.StatusTemplate)
	}
	if len(res.Templates) == 0 {
		errs = append(errs, &gvr.FieldError{File: cfg.Path, Entry: entry, Field: "templates", Err: errors.New("at least one template is required")})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// LoadAll loads one Set per entry of cfg.Resources, in the same order.
func LoadAll(cfg *gvr.Config, opts Options) ([]*Set, error) {
	var (
		sets []*Set
		errs []error
	)
	for _, res := range cfg.Resources {
		s, err := Load(cfg, res, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sets = append(sets, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return sets, nil
}

func parseFile(cfg *gvr.Config, name string) (*template.Template, error) {
	data, err := os.ReadFile(cfg.TemplatePath(name))
	if err != nil {
		return nil, fmt.Errorf("reading template: %w", err)
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(Funcs()).Parse(string(data))
	if err != nil {
		return nil, err
	}
	return t, nil
}
