package configtest

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"

	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/templates"
)

// The schemas every rendered object is checked against: the built-in
// kinds' from the structured-merge-diff schema client-go bundles (the
// schema server-side apply uses, of the Kubernetes version this stencil
// is built with), the config's own kinds' with the API server's admission
// of their generated CRDs (customresource.go), CEL rules included. A kind
// with neither (another operator's custom resource, or an entry's kind
// whose CRD is not generated: a config cannot name a CRD file) is not
// checked.

// schemas checks objects against their kinds' schemas.
type schemas struct {
	builtin managedfields.TypeConverter
	// own admit the resources of the config's generated CRDs, by kind.
	own map[schema.GroupVersionKind]*customResources
}

// newSchemas builds the checks of the entries' kinds.
func newSchemas(ctx context.Context, entries []*entry.Entry) (*schemas, error) {
	s := &schemas{builtin: applyconfigurations.NewTypeConverter(scheme.Scheme), own: map[schema.GroupVersionKind]*customResources{}}
	for _, e := range entries {
		if e.CRD == nil {
			continue
		}
		v, err := newCustomResources(ctx, e.CRD, field.NewPath("schema"))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", e.File, e.Label, err)
		}
		s.own[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}] = v
	}
	return s, nil
}

// checkObject returns what is wrong with a rendered object, each naming
// its field path. An object of the config's own kinds is checked as the
// API server would store it, defaulted; the object itself is unchanged,
// as the controller applies it as rendered.
func (s *schemas) checkObject(ctx context.Context, u *unstructured.Unstructured) []string {
	if v, ok := s.own[u.GroupVersionKind()]; ok {
		_, refused := v.admit(ctx, u.Object)
		return refused
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

// admitResource returns a test's resource as the API server would store
// it (the CRD of set's entry's defaults applied: what the controller
// reads, so what the case renders) and what that CRD refuses in it. An
// entry without a generated CRD has u as it is.
func (s *schemas) admitResource(ctx context.Context, set *templates.Set, u *unstructured.Unstructured) (*unstructured.Unstructured, []string) {
	e := set.Entry()
	if e.CRD == nil {
		return u, nil
	}
	stored, refused := s.own[schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}].admit(ctx, u.Object)
	return &unstructured.Unstructured{Object: stored}, refused
}
