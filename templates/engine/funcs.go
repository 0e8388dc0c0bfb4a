package engine

import (
	"errors"
	"text/template"
)

// refusedFuncs are refused at load, each with the reason stencil gives.
// They are in the parse-time function map only so that a template using
// one fails with this sentence rather than "function not defined".
var refusedFuncs = map[string]string{
	"tpl":    "tpl is refused: it runs text from the custom resource as template code, so a tenant could print anything into a child",
	"lookup": "lookup is refused: templates are hermetic and never read the cluster; put what the template needs in the custom resource's spec",
}

// ParseFuncs are the names a template may mention that are bound per
// executor (Bind) or refused after parsing (refusedFuncs).
func ParseFuncs() template.FuncMap {
	m := template.FuncMap{}
	stub := func(...any) (string, error) { return "", errors.New("not bound") }
	for _, name := range []string{valueFunc, includeStruct, toYAMLStruct, toJSONStruct} {
		m[name] = stub
	}
	for name := range refusedFuncs {
		m[name] = stub
	}
	return m
}
