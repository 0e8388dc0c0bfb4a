// Package view is what a template sees as dot: a custom resource reduced to
// plain JSON values (Object), detached from the informer cache.
//
// The choice a newcomer may question: the view is a copy, not the
// unstructured object itself. A template, or a function it calls, that
// mutated the cache's object would corrupt what every later sync reads;
// the copy costs one walk of the spec per render and makes that impossible.
package view

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/contract"
)

// Object is the small struct templates see: a custom resource reduced to
// plain values, detached from the informer cache.
type Object struct {
	// Name is metadata.name.
	Name string
	// Namespace is metadata.namespace.
	Namespace string
	// UID is metadata.uid.
	UID string
	// Generation is metadata.generation.
	Generation int64
	// Labels is metadata.labels; never nil, so templates can index it.
	Labels map[string]string
	// Annotations is metadata.annotations; never nil.
	Annotations map[string]string
	// Spec is a deep copy of .spec as maps, lists and scalars; never nil.
	Spec map[string]any
	// Status is a deep copy of .status, but for status.reads; never nil.
	// status.reads is stencil's record of what the last render read: a
	// render that saw it would depend on itself, and stencil's own patch
	// of it would have to render every reader again.
	Status map[string]any
	// Resource identifies the custom resource's type.
	Resource ResourceInfo
	// Reads are what the entry's reads found, by handle: an object, nil
	// or a list (package templates, ResolveReads); nil without reads.
	Reads map[string]any
}

// ResourceInfo is the type of an Object, as templates see it in .Resource.
type ResourceInfo struct {
	// Group is the API group, empty for the core group.
	Group string
	// Version is the API version.
	Version string
	// Kind is the object's kind, e.g. WebApp.
	Kind string
	// Resource is the lowercase plural, e.g. webapps.
	Resource string
}

// APIVersion returns "group/version", or "version" for the core group.
func (r ResourceInfo) APIVersion() string {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
}

// GroupVersionKind returns the object's GVK.
func (r ResourceInfo) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

// NewObject converts u, served as gvr, into the small struct. It never
// mutates u: spec and status are copied, with every number normalised to
// int64 or float64 (a Go int in an unstructured map would make later deep
// copies panic), and a value of any other type is an error, not a panic.
func NewObject(u *unstructured.Unstructured, gvr schema.GroupVersionResource) (*Object, error) {
	if u == nil || u.Object == nil {
		return nil, fmt.Errorf("converting %s: object is empty", gvr.Resource)
	}
	obj := &Object{
		Resource: ResourceInfo{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
	}
	var err error
	if obj.Resource.Kind, err = nestedString(u.Object, "kind"); err != nil {
		return nil, err
	}
	if obj.Resource.Kind == "" {
		return nil, fmt.Errorf("converting %s: object has no kind", gvr.Resource)
	}
	if obj.Name, err = nestedString(u.Object, "metadata", "name"); err != nil {
		return nil, err
	}
	if obj.Namespace, err = nestedString(u.Object, "metadata", "namespace"); err != nil {
		return nil, err
	}
	if obj.UID, err = nestedString(u.Object, "metadata", "uid"); err != nil {
		return nil, err
	}
	if obj.Generation, err = nestedInt64(u.Object, "metadata", "generation"); err != nil {
		return nil, err
	}
	if obj.Labels, err = nestedStringMap(u.Object, "metadata", "labels"); err != nil {
		return nil, err
	}
	if obj.Annotations, err = nestedStringMap(u.Object, "metadata", "annotations"); err != nil {
		return nil, err
	}
	if obj.Spec, err = nestedMapCopy(u.Object, "spec"); err != nil {
		return nil, err
	}
	if obj.Status, err = nestedMapCopy(u.Object, "status"); err != nil {
		return nil, err
	}
	delete(obj.Status, contract.StatusReads)
	return obj, nil
}

func nestedString(obj map[string]any, fields ...string) (string, error) {
	s, _, err := unstructured.NestedString(obj, fields...)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", dotted(fields), err)
	}
	return s, nil
}

func nestedInt64(obj map[string]any, fields ...string) (int64, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", dotted(fields), err)
	}
	if !found || v == nil {
		return 0, nil
	}
	n, err := CopyJSONValue(v)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", dotted(fields), err)
	}
	switch n := n.(type) {
	case int64:
		return n, nil
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), nil
		}
	}
	return 0, fmt.Errorf("reading %s: %v is not an integer", dotted(fields), v)
}

func nestedStringMap(obj map[string]any, fields ...string) (map[string]string, error) {
	m, _, err := unstructured.NestedStringMap(obj, fields...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dotted(fields), err)
	}
	if m == nil {
		m = map[string]string{}
	}
	return m, nil
}

func nestedMapCopy(obj map[string]any, field string) (map[string]any, error) {
	v, ok := obj[field]
	if !ok || v == nil {
		return map[string]any{}, nil
	}
	if _, isMap := v.(map[string]any); !isMap {
		return nil, fmt.Errorf("reading .%s: %w", field, &TypeError{Value: v, Want: "a mapping"})
	}
	c, err := CopyJSONValue(v)
	if err != nil {
		return nil, fmt.Errorf("reading .%s: %w", field, err)
	}
	return c.(map[string]any), nil
}

// TypeError reports a value that is not of a JSON-compatible type.
type TypeError struct {
	// Value is the offending value.
	Value any
	// Want says what was expected.
	Want string
}

// Error implements error.
func (e *TypeError) Error() string {
	return fmt.Sprintf("%v is of type %T, want %s", e.Value, e.Value, e.Want)
}

// CopyJSONValue deep-copies a value made of map[string]any, []any, string,
// bool, nil and numbers. Go integer types and json.Number become int64 (or
// float64 when they do not fit), float32 becomes float64, so the copy is safe
// for runtime.DeepCopyJSONValue; any other type is a *TypeError.
func CopyJSONValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := CopyJSONValue(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := CopyJSONValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = c
		}
		return out, nil
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint:
		if uint64(v) > math.MaxInt64 {
			return float64(v), nil
		}
		return int64(v), nil
	case uint64:
		if v > math.MaxInt64 {
			return float64(v), nil
		}
		return int64(v), nil
	case float32:
		return float64(v), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", v, err)
		}
		return f, nil
	default:
		return nil, &TypeError{Value: v, Want: "a JSON value"}
	}
}

func dotted(fields []string) string {
	s := ""
	for _, f := range fields {
		s += "." + f
	}
	return s
}
