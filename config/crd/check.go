package crd

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// The checks a generated CRD passes before anything applies it, offline
// and without the API server's own validation package: that package links
// k8s.io/apiserver, cel-go, gRPC and OpenTelemetry into every binary that
// loads a config (18 MB and 11 MiB of resident memory at start). What it
// checks beyond these, the API server checks when the CRD is applied or
// dry-run ("stencil validate --server", "run --manage-crds", "diff
// --manage-crds"), and stencil-test runs offline, linking that package
// where stencil does not ("stencil test"): CEL rules compile against the
// schema, within their cost.
//
// Offline, here: names as the API server's rules spell them, the schema
// structural (the API server's own structural-schema package), every
// default valid against its schema, printer columns (type and JSONPath).

// printerColumnTypes are the types a printer column may have.
var printerColumnTypes = []string{"boolean", "date", "integer", "number", "string"}

// check checks crd offline and maps each error to the config's paths
// under p.
func check(crd *apiextensionsv1.CustomResourceDefinition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := field.NewPath("spec", "names")
	for _, n := range []struct {
		name, value string
		lower       bool
	}{{"plural", crd.Spec.Names.Plural, false}, {"singular", crd.Spec.Names.Singular, false},
		{"kind", crd.Spec.Names.Kind, true}, {"listKind", crd.Spec.Names.ListKind, true}} {
		v := n.value
		if n.lower {
			v = strings.ToLower(v)
		}
		if msgs := validation.IsDNS1035Label(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(names.Child(n.name), n.value, strings.Join(msgs, ",")))
		}
	}
	for i, s := range crd.Spec.Names.ShortNames {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(names.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	for i, s := range crd.Spec.Names.Categories {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(names.Child("categories").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(crd.Spec.Group); len(msgs) > 0 || !strings.Contains(crd.Spec.Group, ".") {
		errs = append(errs, field.Invalid(field.NewPath("spec", "group"), crd.Spec.Group, "must be a DNS subdomain with at least one dot"))
	}
	v := crd.Spec.Versions[0]
	vp := field.NewPath("spec", "versions").Index(0)
	for i, col := range v.AdditionalPrinterColumns {
		errs = append(errs, checkColumn(col, vp.Child("additionalPrinterColumns").Index(i))...)
	}
	errs = append(errs, checkSchema(v.Schema.OpenAPIV3Schema, vp.Child("schema", "openAPIV3Schema"))...)
	for _, e := range errs {
		crdPath := e.Field
		e.Field = ConfigPath(crdPath, p)
		e.Detail = strings.TrimSpace(e.Detail + " (CRD field " + crdPath + ")")
	}
	return errs
}

// checkColumn checks a printer column as the API server does, and its
// JSONPath with the parser kubectl prints it with.
func checkColumn(col apiextensionsv1.CustomResourceColumnDefinition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if col.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if !slices.Contains(printerColumnTypes, col.Type) {
		errs = append(errs, field.Invalid(p.Child("type"), col.Type, "must be one of "+strings.Join(printerColumnTypes, ",")))
	}
	switch {
	case col.JSONPath == "" || col.JSONPath[0] != '.':
		errs = append(errs, field.Invalid(p.Child("jsonPath"), col.JSONPath, "must be a simple json path starting with ."))
	default:
		if err := jsonpath.New(col.Name).Parse("{" + col.JSONPath + "}"); err != nil {
			errs = append(errs, field.Invalid(p.Child("jsonPath"), col.JSONPath, err.Error()))
		}
	}
	return errs
}

// checkSchema checks that root is structural and that every default is
// valid against the schema it sits in.
func checkSchema(root *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(root, &internal, nil); err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return field.ErrorList{field.Invalid(p, nil, err.Error())}
	}
	if errs := structuralschema.ValidateStructural(p, ss); len(errs) > 0 {
		return errs
	}
	return checkDefaults(root, p)
}

// checkDefaults validates each default under s against the schema it is
// the default of, with kube-openapi's validator (the API server's, without
// its CEL rules).
func checkDefaults(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Default != nil {
		errs = append(errs, checkDefault(s, p.Child("default"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		child := s.Properties[k]
		errs = append(errs, checkDefaults(&child, p.Child("properties").Key(k))...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		errs = append(errs, checkDefaults(s.Items.Schema, p.Child("items"))...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		errs = append(errs, checkDefaults(s.AdditionalProperties.Schema, p.Child("additionalProperties"))...)
	}
	return errs
}

// checkDefault validates s.Default against s.
func checkDefault(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	bare := s.DeepCopy()
	bare.Default = nil
	sch, err := openAPISchema(bare)
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	var value any
	if err := json.Unmarshal(s.Default.Raw, &value); err != nil {
		return field.ErrorList{field.Invalid(p, string(s.Default.Raw), "is not JSON")}
	}
	res := validate.NewSchemaValidator(sch, nil, "", strfmt.Default).Validate(value)
	var errs field.ErrorList
	for _, e := range res.Errors {
		errs = append(errs, field.Invalid(p, value, strings.TrimPrefix(e.Error(), " in body ")))
	}
	return errs
}

// openAPISchema is s as kube-openapi's validator takes it, without its CEL
// rules (the validator does not run them).
func openAPISchema(s *apiextensionsv1.JSONSchemaProps) (*spec.Schema, error) {
	bare := s.DeepCopy()
	bare.XValidations = nil
	raw, err := json.Marshal(bare)
	if err != nil {
		return nil, err
	}
	var sch spec.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return nil, err
	}
	return &sch, nil
}
