package crd

import (
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Expose keeps only the value paths listed (dotted, e.g. "image.tag"),
// with the objects on their way; a path the schema does not have is an
// error under p, naming it. An object on the way keeps its own
// constraints, but its required list is narrowed to the fields kept and
// its default is dropped (it would name fields no longer declared).
func Expose(props *apiextensionsv1.JSONSchemaProps, paths []string, p *field.Path) (*apiextensionsv1.JSONSchemaProps, field.ErrorList) {
	out := narrowed(props)
	var errs field.ErrorList
	for i, path := range paths {
		if err := expose(props, out, strings.Split(path, ".")); err != "" {
			errs = append(errs, field.Invalid(p.Index(i), path, err))
		}
	}
	return out, errs
}

// narrowed copies object s without its properties, required fields or
// default: expose adds back the ones kept.
func narrowed(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	out := s.DeepCopy()
	out.Properties, out.Required, out.Default = nil, nil, nil
	return out
}

// expose copies the field at path from `from` into `to`, creating the
// objects on the way; it returns why it cannot, or "".
func expose(from, to *apiextensionsv1.JSONSchemaProps, path []string) string {
	name := path[0]
	child, ok := from.Properties[name]
	if !ok || name == "" {
		return "the schema has no field " + name + " here"
	}
	if to.Properties == nil {
		to.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	if len(path) == 1 {
		to.Properties[name] = *child.DeepCopy()
		keepRequired(from, to, name)
		return ""
	}
	kept, ok := to.Properties[name]
	if ok && equalSchema(&kept, &child) {
		// The whole object is exposed already: check the path only.
		return expose(&child, narrowed(&child), path[1:])
	}
	if !ok {
		kept = *narrowed(&child)
	}
	if err := expose(&child, &kept, path[1:]); err != "" {
		return err
	}
	to.Properties[name] = kept
	keepRequired(from, to, name)
	return ""
}

// keepRequired lists name as required in to if from requires it, in from's
// order.
func keepRequired(from, to *apiextensionsv1.JSONSchemaProps, name string) {
	if !contains(from.Required, name) || contains(to.Required, name) {
		return
	}
	to.Required = to.Required[:0:0]
	for _, r := range from.Required {
		if _, kept := to.Properties[r]; kept {
			to.Required = append(to.Required, r)
		}
	}
}

// equalSchema reports whether a and b are the same schema.
func equalSchema(a, b *apiextensionsv1.JSONSchemaProps) bool {
	return string(rawJSON(a).Raw) == string(rawJSON(b).Raw)
}

// Close drops x-kubernetes-preserve-unknown-fields from every object of s
// that declares properties (at path and below) and returns the paths it
// closed: a chart's schema that lets `image` hold any field would let a
// tenant set image.repository through a CRD that exposes only image.tag.
// An object that declares no properties is a map (labels, annotations)
// and stays open.
func Close(s *apiextensionsv1.JSONSchemaProps, path string) []string {
	if s == nil {
		return nil
	}
	var closed []string
	if s.Properties != nil && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		s.XPreserveUnknownFields = nil
		closed = append(closed, path)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		child := s.Properties[name]
		closed = append(closed, Close(&child, path+"."+name)...)
		s.Properties[name] = child
	}
	if s.Items != nil {
		closed = append(closed, Close(s.Items.Schema, path+"[]")...)
	}
	if s.AdditionalProperties != nil {
		closed = append(closed, Close(s.AdditionalProperties.Schema, path+".*")...)
	}
	return closed
}
