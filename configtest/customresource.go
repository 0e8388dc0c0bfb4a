package configtest

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"stencil.dev/stencil/config/crd"
)

// What the API server does with a custom resource of a config's own kind
// when it is created, in its order, with its own packages: prune fields the
// schema does not declare (reported: kubectl's strict field validation
// refuses them), apply the schema's defaults, then validate the stored
// object against the schema (types, ranges, patterns, formats), its list
// types, embedded objects' metadata, and its x-kubernetes-validations
// rules (CEL) within the API server's per-rule and per-object cost limits.
//
// These packages link k8s.io/apiserver's CEL library, gRPC and
// OpenTelemetry; they stay here, in stencil-test, so that stencil, its
// controller and its render workers do not carry them (config/crd checks
// what it can offline without them).

// customResources admits the custom resources of one generated CRD.
type customResources struct {
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	// rules runs the CRD's CEL rules; nil when it has none.
	rules *cel.Validator
}

// newCustomResources validates c as the API server does when it is
// applied (its CEL rules must compile within their estimated cost) and
// returns what admits its resources. An error names each field of the
// config's schema (under p) the API server would refuse.
func newCustomResources(ctx context.Context, c *apiextensionsv1.CustomResourceDefinition, p *field.Path) (*customResources, error) {
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, &internal, nil); err != nil {
		return nil, fmt.Errorf("converting CRD %s: %w", c.Name, err)
	}
	// What the API server's PrepareForCreate records before it validates.
	for _, v := range internal.Spec.Versions {
		if v.Storage {
			internal.Status.StoredVersions = []string{v.Name}
		}
	}
	if errs := crdvalidation.ValidateCustomResourceDefinition(ctx, &internal); len(errs) > 0 {
		for _, e := range errs {
			crdPath := e.Field
			e.Field = crd.ConfigPath(crdPath, p)
			e.Detail += " (CRD field " + crdPath + ")"
			switch e.BadValue.(type) {
			case string, int, int64, float64, bool, nil:
			default:
				// A rule's or schema's Go struct, printed as JSON, says
				// less than the field and the detail do.
				e.BadValue = field.OmitValueType{}
			}
		}
		return nil, fmt.Errorf("the API server would refuse the generated CRD %s: %w", c.Name, errs.ToAggregate())
	}
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Schema == nil || c.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s: want one version with a schema", c.Name)
	}
	root := new(apiextensions.JSONSchemaProps)
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(c.Spec.Versions[0].Schema.OpenAPIV3Schema, root, nil); err != nil {
		return nil, fmt.Errorf("converting CRD %s's schema: %w", c.Name, err)
	}
	ss, err := structuralschema.NewStructural(root)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", c.Name, err)
	}
	sv, _, err := validation.NewSchemaValidator(root)
	if err != nil {
		return nil, fmt.Errorf("CRD %s: %w", c.Name, err)
	}
	return &customResources{structural: ss, schema: sv, rules: cel.NewValidator(ss, true, celconfig.PerCallLimit)}, nil
}

// admit returns obj as the API server would store it, its defaults
// applied, and what the API server would refuse in it, each a field error
// as kubectl prints it (spec: Invalid value: "object": <the rule's
// message>); none when it would store it.
func (v *customResources) admit(ctx context.Context, obj map[string]any) (map[string]any, []string) {
	stored := runtime.DeepCopyJSON(obj)
	var refused []string
	for _, p := range pruning.PruneWithOptions(stored, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		refused = append(refused, p+": not in the schema (the API server drops it; kubectl refuses it)")
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(stored, v.structural)
	structuraldefaulting.Default(stored, v.structural)

	var errs field.ErrorList
	errs = append(errs, validation.ValidateCustomResource(nil, stored, v.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, stored, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, stored)...)
	skipped := v.rules != nil && blocking(errs)
	if v.rules != nil && !skipped {
		ruleErrs, _ := v.rules.Validate(ctx, nil, v.structural, stored, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, ruleErrs...)
	}
	for _, e := range errs {
		refused = append(refused, e.Error())
	}
	// Sorted, as kube-openapi reports a map's fields in no set order.
	slices.Sort(refused)
	if skipped {
		// The API server's own rule and words: CEL rules are not run over
		// an object whose shape is wrong.
		refused = append(refused, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation").Error())
	}
	return stored, refused
}

// blocking says whether errs hold an error after which the API server
// does not run CEL rules (customresource strategy's hasBlockingErr).
func blocking(errs field.ErrorList) bool {
	return slices.ContainsFunc(errs, func(e *field.Error) bool {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
		return false
	})
}
