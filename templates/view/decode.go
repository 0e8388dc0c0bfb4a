package view

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// DecodeObjects decodes a YAML (or JSON) stream of objects as a user
// writes one for stencil render, argocd and test: split as kubectl splits
// it, empty and null documents skipped, numbers as the controller's caches
// hold them (int64, or float64 when not whole). An error names the
// document by its place in the stream.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("splitting documents: %w", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if m == nil {
			continue
		}
		v, err := CopyJSONValue(m)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: v.(map[string]any)})
	}
}
