package crd

import (
	"regexp"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"stencil.dev/stencil/contract"
)

// Build generates the CRD of d and checks it as the API server's
// validation does (structural schema, CEL rules compile, printer columns);
// errors name the field path under p.
func Build(d Definition, p *field.Path) (*apiextensionsv1.CustomResourceDefinition, field.ErrorList) {
	status, errs := statusSchema(d.Status, p.Child("status"))
	if len(errs) > 0 {
		return nil, errs
	}
	root := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       *specSchema(d),
			"status":     *status,
		},
	}
	if len(root.Properties["spec"].Required) > 0 {
		root.Required = []string{"spec"}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: d.Plural + "." + d.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: d.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: d.Plural, Singular: strings.ToLower(d.Kind), Kind: d.Kind, ListKind: d.Kind + "List",
				ShortNames: d.ShortNames, Categories: d.Categories,
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: d.Version, Served: true, Storage: true,
				Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: printerColumns(d.Columns),
			}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
	if errs := check(crd, p); len(errs) > 0 {
		return nil, errs
	}
	return crd, nil
}

// specSchema is d.Spec with d's CEL rules and unknown-field preservation.
func specSchema(d Definition) *apiextensionsv1.JSONSchemaProps {
	spec := &apiextensionsv1.JSONSchemaProps{Type: "object"}
	if d.Spec != nil {
		spec = d.Spec.DeepCopy()
	}
	for _, r := range d.Rules {
		spec.XValidations = append(spec.XValidations, apiextensionsv1.ValidationRule{Rule: r.Rule, Message: r.Message})
	}
	if d.PreserveUnknownFields {
		spec.XPreserveUnknownFields = ptrTo(true)
	}
	return spec
}

// statusSchema merges the status fields a config declares with stencil's
// own; a declared field that stencil writes is an error under p.
func statusSchema(declared *apiextensionsv1.JSONSchemaProps, p *field.Path) (*apiextensionsv1.JSONSchemaProps, field.ErrorList) {
	status := &apiextensionsv1.JSONSchemaProps{Type: "object"}
	if declared != nil {
		status = declared.DeepCopy()
	}
	var errs field.ErrorList
	own := stencilStatusFields()
	if status.Properties == nil {
		status.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	for _, name := range sortedKeys(own) {
		if _, taken := status.Properties[name]; taken {
			errs = append(errs, field.Invalid(p.Child(name), name, "is a status field stencil writes itself"))
			continue
		}
		status.Properties[name] = own[name]
	}
	// A new resource's status says observedGeneration 0 until stencil's
	// first status patch: kstatus then reads it as InProgress (0 is less
	// than any generation), not as Current with no conditions.
	status.Default = &apiextensionsv1.JSON{Raw: []byte(`{"observedGeneration":0}`)}
	return status, errs
}

// stencilStatusFields are the status fields stencil writes (package
// controller/reconcile/status), typed.
func stencilStatusFields() map[string]apiextensionsv1.JSONSchemaProps {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	integer := apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}
	condition := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"type", "status"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": str, "status": str, "reason": str, "message": str,
			"lastTransitionTime": {Type: "string", Format: "date-time"},
			"observedGeneration": integer,
		},
	}
	fields := map[string]apiextensionsv1.JSONSchemaProps{
		"conditions": {
			Type:         "array",
			Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
			XListType:    ptrTo("map"),
			XListMapKeys: []string{"type"},
		},
		"observedGeneration":            integer,
		"phase":                         str,
		"replicas":                      integer,
		"readyReplicas":                 integer,
		contract.StatusTemplateRevision: str,
		contract.StatusDeployedRelease: {
			Type:       "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str},
		},
		contract.StatusReads: {
			Type: "array",
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"apiVersion": str, "kind": str, "namespace": str, "name": str, "resourceVersion": str, "generation": integer,
				},
			}},
		},
	}
	return fields
}

// printerColumns are Ready, Reason, the declared columns, then Age.
func printerColumns(declared []Column) []apiextensionsv1.CustomResourceColumnDefinition {
	ready := `.status.conditions[?(@.type=="` + contract.ConditionReady + `")]`
	cols := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Ready", Type: "string", JSONPath: ready + ".status"},
		{Name: "Reason", Type: "string", JSONPath: ready + ".reason"},
	}
	for _, c := range declared {
		typ := c.Type
		if typ == "" {
			typ = "string"
		}
		cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{
			Name: c.Name, Type: typ, JSONPath: c.JSONPath, Description: c.Description, Priority: c.Priority,
		})
	}
	return append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"})
}

var (
	// The internal type holds the schema and columns of a CRD's only
	// version at spec level.
	schemaPrefix = regexp.MustCompile(`^spec\.(?:versions\[0\]\.schema|validation)\.openAPIV3Schema`)
	columnPrefix = regexp.MustCompile(`^spec\.(?:versions\[0\]\.)?additionalPrinterColumns\[(\d+)\]`)
	propertySeg  = regexp.MustCompile(`^\.properties\[([^\]]*)\]`)
	ruleSeg      = regexp.MustCompile(`^\.x-kubernetes-validations\[(\d+)\]`)
)

// ConfigPath maps the path of an error in the CRD to the config's path
// under p: the schema's spec and status fields, the spec's rules (under
// validation) and the declared printer columns (under printerColumns).
// A path it does not map (names, group, version) is p itself. Exported
// for stencil-test, which runs the API server's CRD validation offline.
func ConfigPath(crdPath string, p *field.Path) string {
	if m := columnPrefix.FindStringSubmatch(crdPath); m != nil {
		i, _ := strconv.Atoi(m[1])
		if i < 2 {
			return p.String()
		}
		return withRest(p.Child("printerColumns").Index(i-2), crdPath[len(m[0]):])
	}
	prefix := schemaPrefix.FindString(crdPath)
	if prefix == "" {
		return p.String()
	}
	rest := crdPath[len(prefix):]
	path := p
	for first := true; ; first = false {
		if m := ruleSeg.FindStringSubmatch(rest); m != nil && !first && path.String() == p.Child("spec").String() {
			i, _ := strconv.Atoi(m[1])
			return withRest(p.Child("validation").Index(i), rest[len(m[0]):])
		}
		m := propertySeg.FindStringSubmatch(rest)
		if m == nil {
			break
		}
		path, rest = path.Child(m[1]), rest[len(m[0]):]
	}
	return withRest(path, rest)
}

// withRest appends the unmapped remainder of a CRD path to path.
func withRest(path *field.Path, rest string) string {
	if rest == "" {
		return path.String()
	}
	return path.String() + "." + strings.TrimPrefix(rest, ".")
}
