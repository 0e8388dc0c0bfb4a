package config

import (
	"fmt"
	"regexp"

	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"stencil.dev/stencil/config/crd"
)

// The API from the config: an entry with a schema declares the API its
// tenants use, and stencil generates its CustomResourceDefinition
// (package config/crd). The CRD is built and checked as the API server
// checks it when the config loads, so a schema the API server would refuse
// is a config error naming the file, entry and field.

// Schema is the API of an entry: its spec (in kro's SimpleSchema notation,
// as a structural openAPIV3Schema, or derived from its chart), the fields
// its status template writes, CEL rules and printer columns.
type Schema struct {
	// Spec maps each spec field to "type | markers", a nested mapping, or
	// "[]T" / "map[string]T" (kro's SimpleSchema).
	Spec map[string]any `json:"spec,omitempty"`
	// OpenAPIV3Schema, instead of Spec, is the spec's structural schema,
	// as a CRD spells it.
	OpenAPIV3Schema *apiextensionsv1.JSONSchemaProps `json:"openAPIV3Schema,omitempty"`
	// FromChart, instead of Spec, derives the spec from the entry's chart:
	// its values.schema.json, else the types of its values.yaml.
	FromChart bool `json:"fromChart,omitempty"`
	// Expose lists the value paths tenants may set (fromChart), e.g.
	// image.tag; only those appear in the spec.
	Expose []string `json:"expose,omitempty"`
	// Status maps the fields the status template writes, in SimpleSchema
	// notation; stencil's own status fields are added.
	Status map[string]any `json:"status,omitempty"`
	// Validation are CEL rules over the spec (x-kubernetes-validations).
	Validation []ValidationRule `json:"validation,omitempty"`
	// PrinterColumns follow Ready and Reason in kubectl get.
	PrinterColumns []PrinterColumn `json:"printerColumns,omitempty"`
	// PreserveUnknownFields keeps spec fields the schema does not declare
	// (x-kubernetes-preserve-unknown-fields); off, the API server prunes
	// them and kubectl refuses them.
	PreserveUnknownFields bool `json:"preserveUnknownFields,omitempty"`
}

// ValidationRule is a CEL rule over the spec.
type ValidationRule struct {
	// Rule is the CEL expression; self is the spec.
	Rule string `json:"rule"`
	// Message is what kubectl prints when the rule fails.
	Message string `json:"message,omitempty"`
}

// PrinterColumn is a column of kubectl get.
type PrinterColumn struct {
	Name        string `json:"name"`
	JSONPath    string `json:"jsonPath"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
}

// kindPattern is what a Kind may be: CamelCase letters and digits.
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// validateAPI checks the API fields of an entry: kind, shortNames and
// categories go with a schema, which needs a group and says where its spec
// comes from exactly once.
func validateAPI(r Resource, p *field.Path, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	if r.Schema == nil {
		for _, f := range []struct {
			name string
			set  bool
		}{{"kind", r.Kind != ""}, {"shortNames", len(r.ShortNames) > 0}, {"categories", len(r.Categories) > 0}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "is for entries with a schema (stencil generates their CRD)"))
			}
		}
		return errs
	}
	if r.Group == "" && !skip.at(p.Child("group")) {
		errs = append(errs, field.Required(p.Child("group"), "an entry with a schema needs a group: stencil generates its CRD, and the core group is the API server's own"))
	}
	switch k := p.Child("kind"); {
	case skip.at(k):
	case r.Kind == "":
		errs = append(errs, field.Required(k, "an entry with a schema names its kind, e.g. kind: WebApp"))
	case !kindPattern.MatchString(r.Kind):
		errs = append(errs, field.Invalid(k, r.Kind, fmt.Sprintf("%q: a kind is CamelCase letters and digits, e.g. WebApp", r.Kind)))
	}
	s, sp := r.Schema, p.Child("schema")
	sources := 0
	for _, set := range []bool{s.Spec != nil, s.OpenAPIV3Schema != nil, s.FromChart} {
		if set {
			sources++
		}
	}
	if sources != 1 && !skip.under(sp) {
		errs = append(errs, field.Invalid(sp, nil, "needs exactly one of spec, openAPIV3Schema or fromChart: true"))
	}
	if s.FromChart && r.Chart == "" {
		errs = append(errs, field.Invalid(sp.Child("fromChart"), true, "is for chart entries (chart: DIR)"))
	}
	if len(s.Expose) > 0 && !s.FromChart {
		errs = append(errs, field.Forbidden(sp.Child("expose"), "is for fromChart: true (the chart's values a tenant may set)"))
	}
	return errs
}

// completeAPI builds the CRD of every entry with a schema that has no
// error yet, and records what of a chart's values.schema.json a CRD cannot
// express.
func completeAPI(c *Config, skip pathSet) field.ErrorList {
	var errs field.ErrorList
	for i := range c.Resources {
		r, p := &c.Resources[i], field.NewPath("resources").Index(i)
		if r.Schema == nil || skip.under(p) {
			continue
		}
		def, defErrs := r.definition(c, p.Child("schema"))
		errs = append(errs, defErrs...)
		if len(defErrs) > 0 {
			continue
		}
		built, buildErrs := crd.Build(def, p.Child("schema"))
		errs = append(errs, buildErrs...)
		r.CRD = built
	}
	return errs
}

// definition gathers what the entry's CRD is generated from.
func (r *Resource) definition(c *Config, p *field.Path) (crd.Definition, field.ErrorList) {
	s := r.Schema
	d := crd.Definition{Group: r.Group, Version: r.Version, Plural: r.Resource, Kind: r.Kind,
		ShortNames: r.ShortNames, Categories: r.Categories, PreserveUnknownFields: s.PreserveUnknownFields}
	for _, v := range s.Validation {
		d.Rules = append(d.Rules, crd.Rule{Rule: v.Rule, Message: v.Message})
	}
	for _, pc := range s.PrinterColumns {
		d.Columns = append(d.Columns, crd.Column{Name: pc.Name, JSONPath: pc.JSONPath, Type: pc.Type, Description: pc.Description, Priority: pc.Priority})
	}
	var errs field.ErrorList
	switch {
	case s.Spec != nil:
		d.Spec, errs = crd.Simple(s.Spec, p.Child("spec"))
	case s.OpenAPIV3Schema != nil:
		d.Spec = s.OpenAPIV3Schema.DeepCopy()
	case s.FromChart:
		d.Spec, errs = r.chartSpec(c, p)
	}
	if s.Status != nil {
		status, statusErrs := crd.Simple(s.Status, p.Child("status"))
		d.Status, errs = status, append(errs, statusErrs...)
	}
	return d, errs
}

// chartSpec derives the spec from the entry's chart: its values.schema.json
// translated (what a CRD cannot express is recorded in SchemaNotes), else
// the types of its values.yaml; narrowed to the exposed paths.
func (r *Resource) chartSpec(c *Config, p *field.Path) (*apiextensionsv1.JSONSchemaProps, field.ErrorList) {
	loaded, err := loader.Load(c.TemplatePath(r.Chart))
	if err != nil {
		return nil, field.ErrorList{field.Invalid(p.Child("fromChart"), true, fmt.Sprintf("%s: %v", r.Chart, err))}
	}
	ch, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, field.ErrorList{field.Invalid(p.Child("fromChart"), true, r.Chart+": invalid chart apiVersion")}
	}
	var spec *apiextensionsv1.JSONSchemaProps
	if len(ch.Schema) > 0 {
		var dropped []string
		spec, dropped, err = crd.FromJSONSchema(ch.Schema)
		if err != nil {
			return nil, field.ErrorList{field.Invalid(p.Child("fromChart"), true, fmt.Sprintf("%s/values.schema.json: %v", r.Chart, err))}
		}
		for _, d := range dropped {
			r.SchemaNotes = append(r.SchemaNotes, r.Chart+"/values.schema.json: "+d)
		}
		// Helm checks values.yaml against the schema: what it has and the
		// schema does not declare is allowed too.
		spec = crd.Complete(spec, crd.FromValues(ch.Values))
	} else {
		spec = crd.FromValues(ch.Values)
	}
	if len(r.Schema.Expose) > 0 {
		var errs field.ErrorList
		if spec, errs = crd.Expose(spec, r.Schema.Expose, p.Child("expose")); len(errs) > 0 {
			return nil, errs
		}
	}
	if !r.Schema.PreserveUnknownFields {
		for _, closed := range crd.Close(spec, "spec") {
			r.SchemaNotes = append(r.SchemaNotes, r.Chart+"/values.schema.json: "+closed+
				": the schema lets it hold fields it does not declare (additionalProperties: true); the CRD does not (schema.preserveUnknownFields: true keeps them)")
		}
	}
	return spec, nil
}

// CRDObjects returns the CRDs the config's schemas generate, as objects to
// apply (no status, no creation time), in config order.
func (c *Config) CRDObjects() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, r := range c.Resources {
		if r.CRD == nil {
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r.CRD)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, u)
	}
	return out, nil
}
