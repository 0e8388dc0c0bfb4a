package configtest

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"

	"stencil.dev/stencil/config/crd"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/templates"
)

// The schemas every rendered object is checked against: the built-in
// kinds' from the structured-merge-diff schema client-go bundles (the
// schema server-side apply uses, of the Kubernetes version this stencil
// is built with), the config's own kinds' from their generated CRDs. A
// kind with neither (another operator's custom resource) is not checked.

// schemas checks objects against their kinds' schemas.
type schemas struct {
	builtin managedfields.TypeConverter
	// own are the validators of the config's generated CRDs, by kind.
	own map[schema.GroupVersionKind]*crd.Validator
}

// newSchemas builds the checks of the entries' kinds.
func newSchemas(entries []*entry.Entry) (*schemas, error) {
	s := &schemas{builtin: applyconfigurations.NewTypeConverter(scheme.Scheme), own: map[schema.GroupVersionKind]*crd.Validator{}}
	for _, e := range entries {
		if e.CRD == nil {
			continue
		}
		v, err := crd.NewValidator(e.CRD)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", e.File, e.Label, err)
		}
		s.own[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}] = v
	}
	return s, nil
}

// checkObject returns what is wrong with a rendered object, each naming
// its field path.
func (s *schemas) checkObject(u *unstructured.Unstructured) []string {
	if v, ok := s.own[u.GroupVersionKind()]; ok {
		return v.Validate(u.Object)
	}
	if _, err := s.builtin.ObjectToTyped(u); err != nil {
		if strings.Contains(err.Error(), "no corresponding type") {
			return nil
		}
		var out []string
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "errors:") {
				out = append(out, strings.TrimPrefix(line, "- "))
			}
		}
		return out
	}
	return nil
}

// checkResource returns what the CRD of set's entry refuses in a test's
// resource; nothing when the entry generates no CRD.
func (s *schemas) checkResource(set *templates.Set, u *unstructured.Unstructured) []string {
	e := set.Entry()
	if e.CRD == nil {
		return nil
	}
	return s.own[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}].Validate(u.Object)
}
