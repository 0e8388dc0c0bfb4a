package config

import (
	"fmt"
	"regexp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API from the config: an entry with a schema declares the API its
// tenants use, and stencil generates its CustomResourceDefinition (package
// entry builds it with package config/crd). Here the schema is decoded and
// its fields checked against each other.

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
