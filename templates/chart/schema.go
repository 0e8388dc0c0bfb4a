package chart

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// Values are checked against the charts' values.schema.json as Helm
// checks them (cutil.ValidateAgainstSchema: the root chart's schema, then
// each enabled subchart's against its values, the same messages), with
// each schema compiled once at load: Helm compiles it again on every
// render, a sixth of a small chart's render.

// schemas holds a chart's compiled schemas, by chart path (ChartFullPath).
type schemas map[string]*jsonschema.Schema

// compileSchemas compiles the schema of ch and of every chart vendored
// under it; checkSchema has kept their references inside the file.
func compileSchemas(ch *chartv2.Chart) (schemas, error) {
	out := schemas{}
	var errs []error
	walkCharts(ch, func(sub *chartv2.Chart) {
		if len(sub.Schema) == 0 {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sub.Schema))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/values.schema.json: %w", sub.ChartFullPath(), err))
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("file:///values.schema.json", doc); err != nil {
			errs = append(errs, fmt.Errorf("%s/values.schema.json: %w", sub.ChartFullPath(), err))
			return
		}
		s, err := c.Compile("file:///values.schema.json")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/values.schema.json: %w", sub.ChartFullPath(), err))
			return
		}
		out[sub.ChartFullPath()] = s
	})
	return out, errors.Join(errs...)
}

// validate is Helm's ValidateAgainstSchema over ch (the render's copy,
// its dependencies processed) with the compiled schemas.
func (s schemas) validate(ch *chartv2.Chart, values map[string]any) error {
	var sb strings.Builder
	if v, ok := s[ch.ChartFullPath()]; ok {
		if err := v.Validate(values); err != nil {
			fmt.Fprintf(&sb, "%s:\n", ch.Name())
			sb.WriteString(strings.TrimPrefix(err.Error(), "jsonschema validation failed with 'file:///values.schema.json#'\n") + "\n")
		}
	}
	for _, sub := range ch.Dependencies() {
		raw, ok := values[sub.Name()]
		if !ok || raw == nil {
			continue
		}
		subValues, ok := raw.(map[string]any)
		if !ok {
			fmt.Fprintf(&sb, "%s:\ninvalid type for values: expected object (map), got %T\n", sub.Name(), raw)
			continue
		}
		if err := s.validate(sub, subValues); err != nil {
			sb.WriteString(err.Error())
		}
	}
	if sb.Len() > 0 {
		return errors.New(sb.String())
	}
	return nil
}
