// Package crd generates the CustomResourceDefinition of a config entry
// that declares its API (an entry's schema): the spec from kro's
// SimpleSchema notation, from a structural openAPIV3Schema, or from a
// chart's values (values.schema.json, else the types of values.yaml),
// narrowed to the value paths tenants may set; stencil's own status
// fields, typed; CEL rules; printer columns.
//
// The choice a newcomer may question: the CRD is built as apiextensions'
// own Go types and checked offline with the API server's own structural
// schema package and kube-openapi's validator, not with the API server's
// CRD validation, which would link k8s.io/apiserver, cel-go and gRPC into
// every binary that loads a config. A schema the API server would refuse
// is refused when the config loads, naming the file, entry and field,
// except a CEL rule that does not compile: the API server compiles those,
// and so does stencil-test (check.go says where). Custom resources
// themselves are checked against the CRD in stencil-test alone
// (configtest), with the API server's packages, CEL rules included.
package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Rule is a CEL validation rule over the spec (x-kubernetes-validations).
type Rule struct {
	Rule    string
	Message string
}

// Column is a printer column a config declares.
type Column struct {
	Name, JSONPath, Type, Description string
	Priority                          int32
}

// Definition is what a CRD is generated from.
type Definition struct {
	// Group, Version and Plural name the resource; Kind its kind.
	Group, Version, Plural, Kind string
	ShortNames, Categories       []string
	// Spec is the spec's schema; Status the fields the status template
	// writes (nil: none), next to which stencil's own are added.
	Spec, Status *apiextensionsv1.JSONSchemaProps
	// Rules are CEL rules over the spec.
	Rules []Rule
	// Columns follow Ready and Reason; Age is last.
	Columns []Column
	// PreserveUnknownFields keeps undeclared spec fields.
	PreserveUnknownFields bool
}
