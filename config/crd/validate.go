package crd

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// Validator checks objects against a CRD's schema offline, as the API
// server would store them: fields the schema does not declare (which the
// server prunes, silently, or kubectl refuses) and values of the wrong
// type, out of range or not matching. CEL rules are the API server's
// (package doc).
type Validator struct {
	structural *structuralschema.Structural
	validator  *validate.SchemaValidator
}

// NewValidator returns the Validator of c's only version.
func NewValidator(c *apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	if len(c.Spec.Versions) == 0 || c.Spec.Versions[0].Schema == nil || c.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s has no schema", c.Name)
	}
	root := c.Spec.Versions[0].Schema.OpenAPIV3Schema
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(root, &internal, nil); err != nil {
		return nil, err
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, err
	}
	sch, err := openAPISchema(root)
	if err != nil {
		return nil, err
	}
	return &Validator{structural: ss, validator: validate.NewSchemaValidator(sch, nil, "", strfmt.Default)}, nil
}

// Validate returns what is wrong with obj, each naming its field path;
// none when the API server would store it as it is.
func (v *Validator) Validate(obj map[string]any) []string {
	var out []string
	cp := runtime.DeepCopyJSON(obj)
	for _, p := range pruning.PruneWithOptions(cp, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, p+": not in the schema (the API server drops it)")
	}
	// metadata is the API server's to check, not the schema's.
	delete(cp, "metadata")
	for _, e := range v.validator.Validate(cp).Errors {
		out = append(out, strings.TrimPrefix(e.Error(), " in body"))
	}
	slices.Sort(out)
	return out
}
