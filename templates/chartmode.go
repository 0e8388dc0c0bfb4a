package templates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/kinds"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/entry"
	"stencil.dev/stencil/templates/chart"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// Chart mode: an entry that names a Helm chart (package chart renders
// it). What the chart renders is held to the same child contract as a
// template's output, with two differences a chart needs: a kind is
// allowed by group and kind, whatever version the chart picks from
// .Capabilities, and an object the chart renders cluster-scoped fails
// the render naming it.

// loadChart loads the chart of a chart entry into s.
func (s *Set) loadChart(cfg *config.Config, e *entry.Entry) error {
	c, err := chart.New(e.LoadedChart, cfg.TemplatePath(e.Chart))
	if err != nil {
		return &config.FieldError{File: cfg.Path, Entry: e.Label, Field: "chart", Err: err}
	}
	s.chart = c
	if s.specSchema, err = specSchema(e); err != nil {
		return &config.FieldError{File: cfg.Path, Entry: e.Label, Field: "schema", Err: err}
	}
	if e.Rollout != nil {
		h := sha256.New()
		h.Write([]byte(c.Digest()))
		s.revision = hex.EncodeToString(h.Sum(nil)[:5])
	}
	return nil
}

// Chart returns the entry's chart, nil for a template entry.
func (s *Set) Chart() *chart.Chart { return s.chart }

// renderChart renders the chart for parent: the release is the resource
// (its name and namespace), its spec the values.
func (s *Set) renderChart(parent *view.Object) (r *Result, err error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, &engine.RenderError{Template: s.res.Chart, Err: fmt.Errorf("render panicked: %v", p)}
		}
	}()
	spec, dropped := s.exposed(parent.Spec)
	rel := chart.Release{Name: parent.Name, Namespace: parent.Namespace, Spec: spec, Overrides: s.res.OverrideValues,
		Upgrade: deployed(parent), Capabilities: s.capabilities, Budget: s.budget, TenantTemplates: s.res.TenantTemplates,
		Reads: ReadObjects(parent.Reads)}
	out, err := s.chart.Render(context.Background(), rel)
	if err != nil {
		return nil, &engine.RenderError{Template: s.res.Chart, Err: err}
	}
	r = &Result{Hooks: out.Hooks, Notes: out.Notes, Release: parent.Name, Dropped: dropped,
		Status: map[string]any{contract.StatusDeployedRelease: map[string]any{"name": parent.Name}}}
	var errs []error
	seen := map[childKey]string{}
	nodes := resultNodes{bound: s.budget.ResultNodes}
	for _, m := range out.Manifests {
		v := m.Object
		if m.Err != nil {
			errs = append(errs, &engine.RenderError{Template: m.Template, Err: m.Err})
			continue
		}
		if v == nil {
			continue
		}
		u, err := s.child(v, parent)
		if err != nil {
			errs = append(errs, &engine.RenderError{Template: m.Template, Err: err})
			continue
		}
		key := childKey{gk: u.GroupVersionKind().GroupKind(), name: u.GetName()}
		if prev, dup := seen[key]; dup {
			errs = append(errs, &engine.RenderError{Template: m.Template, Err: fmt.Errorf("%s %q is also rendered by %s: names must be unique per kind", u.GetKind(), u.GetName(), prev)})
			continue
		}
		seen[key] = m.Template
		if err := nodes.add(m.Template, u); err != nil {
			errs = append(errs, err)
			break
		}
		r.Children = append(r.Children, u)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// chartKind checks a chart's child kind: allowed by group and kind, and
// namespaced.
func (s *Set) chartKind(gvk schema.GroupVersionKind, name string) error {
	if kinds.IsClusterScoped(gvk.GroupKind()) {
		return fmt.Errorf("%s %q is cluster-scoped: a chart entry's children live in the resource's namespace; switch it off with the chart's values", gvkString(gvk), name)
	}
	if !slices.ContainsFunc(s.kinds, func(k schema.GroupVersionKind) bool { return k.GroupKind() == gvk.GroupKind() }) {
		return fmt.Errorf("kind %s is not allowed (allowed: %s)", gvkString(gvk), kindList(s.kinds))
	}
	return nil
}

// deployed reports whether the resource's status says its release was
// deployed before (helm-operator's Deployed condition): the next render
// is an upgrade (.Release.IsUpgrade).
func deployed(parent *view.Object) bool {
	conds, _, _ := unstructured.NestedSlice(parent.Status, "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == contract.ConditionDeployed && m["status"] == "True" {
			return true
		}
	}
	return false
}
