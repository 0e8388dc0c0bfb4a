package crd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A schema cannot take the config load down: 30 definitions, each
// referring twice to the next, is a 3 KB values.schema.json that expanded
// to 2^30 schemas (11 to 36 s and 1.3 GB per load, and once out of
// memory). Each $ref is now translated once, and the expanded size is
// bounded: refused at load, naming the schema.
func TestRefFanOutIsRefused(t *testing.T) {
	defs := map[string]any{}
	for i := range 30 {
		next := map[string]any{"type": "string"}
		if i < 29 {
			next = map[string]any{"$ref": fmt.Sprintf("#/definitions/d%d", i+1)}
		}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"type": "object", "properties": map[string]any{"a": next, "b": next}}
	}
	doc, _ := json.Marshal(map[string]any{"type": "object", "definitions": defs,
		"properties": map[string]any{"x": map[string]any{"$ref": "#/definitions/d0"}}})
	t.Logf("values.schema.json: %d bytes", len(doc))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, _, err := FromJSONSchema(doc)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "expands to more than") {
			t.Errorf("err = %v, want the expansion refused", err)
		}
		t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(20 * time.Second):
		t.Fatal("the translation still runs after 20 s")
	}
	// A definition used many times but small stays fine, translated once.
	small := map[string]any{"type": "object", "definitions": map[string]any{"port": map[string]any{"type": "integer", "minimum": 1}},
		"properties": map[string]any{}}
	for i := range 200 {
		small["properties"].(map[string]any)[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": "#/definitions/port"}
	}
	doc, _ = json.Marshal(small)
	s, _, err := FromJSONSchema(doc)
	if err != nil || len(s.Properties) != 200 || s.Properties["p7"].Minimum == nil {
		t.Errorf("200 uses of one definition: %v", err)
	}
}

// The generated CRD closes the objects a chart's schema opens
// (additionalProperties: true), at the root and below, so that a CRD
// exposing image.tag does not keep image.repository; maps (objects with
// no properties) stay open. Each closed object is named.
func TestOpenObjectsAreClosed(t *testing.T) {
	doc := `{"type":"object","additionalProperties":true,"properties":{
		"image":{"type":"object","additionalProperties":true,"properties":{"tag":{"type":"string"},"repository":{"type":"string"}}},
		"podLabels":{"type":"object"}}}`
	s, _, err := FromJSONSchema([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	exposed, errs := Expose(s, []string{"image.tag", "podLabels"}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	closed := Close(exposed, "spec")
	if strings.Join(closed, ",") != "spec,spec.image" {
		t.Errorf("closed %q, want spec and spec.image", closed)
	}
	if p := exposed.XPreserveUnknownFields; p != nil && *p {
		t.Error("the spec keeps unknown fields")
	}
	if p := exposed.Properties["image"].XPreserveUnknownFields; p != nil && *p {
		t.Error("spec.image keeps unknown fields")
	}
	if p := exposed.Properties["podLabels"].XPreserveUnknownFields; p == nil || !*p {
		t.Error("spec.podLabels, a map, was closed")
	}
}
