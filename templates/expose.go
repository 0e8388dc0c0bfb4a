package templates

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"

	"stencil.dev/stencil/entry"
)

// A chart entry's API is enforced where the chart is rendered, not only
// by the CRD: a CRD migrated from helm-operator keeps unknown fields, a
// platform may write its own, `run` without --manage-crds applies none,
// and `render` and `diff` read a file. So the spec is pruned with the
// schema the entry generates (expose narrows it) by the API server's own
// pruning, before the chart sees it: what the API server would drop from
// the stored object, the chart never gets, whatever the CRD in the
// cluster says. What was dropped is reported (Result.Dropped).

// specSchema returns the structural schema of the spec of e's generated
// CRD, nil when the entry generates none.
func specSchema(e *entry.Entry) (*structuralschema.Structural, error) {
	res := e
	if res.CRD == nil || len(res.CRD.Spec.Versions) == 0 {
		return nil, nil
	}
	v := res.CRD.Spec.Versions[0]
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, nil
	}
	spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		return nil, nil
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&spec, &internal, nil); err != nil {
		return nil, fmt.Errorf("the generated CRD's spec schema: %w", err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("the generated CRD's spec schema is not structural: %w", err)
	}
	return s, nil
}

// exposed returns a copy of spec without what the entry's API does not
// declare, and the paths it dropped ("spec.a.b"); spec itself when the
// entry generates no schema.
func (s *Set) exposed(spec map[string]any) (map[string]any, []string) {
	if s.specSchema == nil || spec == nil {
		return spec, nil
	}
	cp := runtime.DeepCopyJSON(spec)
	dropped := pruning.PruneWithOptions(cp, s.specSchema, false, structuralschema.UnknownFieldPathOptions{
		TrackUnknownFieldPaths: true, ParentPath: []string{"spec"}})
	return cp, dropped
}
