// Package chart renders an unmodified Helm chart for one custom resource:
// chart mode. It loads the chart with Helm's own libraries (loader,
// values coalescing, dependencies with conditions, tags and import-values,
// values.schema.json) and renders it by Helm's engine's rules with Helm's
// own functions (exec.go: the same render, its parse kept between
// renders), so that a chart renders the objects `helm template` renders;
// what it returns is each document decoded, for package templates to hold
// to the child contract.
//
// The choice a newcomer may question: Helm's engine runs, but not on the
// chart's text as written. At load, every template is parsed and
// rewritten (rewrite.go) so that each printing action ends in a function
// of stencil's, and each of Helm's serialisers and parsers is framed by
// two; every function is wrapped to carry the taint of the tenant's text
// (safe.go, engine.Taint). Helm, helm-operator and function-go-templating
// all print a tenant's `tag: "1.0\n  evil: x"` as a new key and run a
// tenant's "{{ ... }}" where a chart calls tpl; a rewrite that keeps Helm's
// engine, its functions and its data model is the smallest change that
// closes that, and benign values never see it.
package chart

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	cutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/strvals"

	"stencil.dev/stencil/templates/budget"
)

// Chart is a loaded chart, its templates rewritten; safe for concurrent
// use (every render works on a copy: Helm's dependency processing
// changes the chart it is given).
type Chart struct {
	ch   *chartv2.Chart
	path string
	// crds lists the files of crds/ (root and subcharts): not installed.
	crds []string
	// templates counts the templates of the chart and its subcharts: what
	// each tpl call clones.
	templates int
	// schemas are its values.schema.json files, compiled (schema.go).
	schemas schemas
	// executors hold its templates parsed, per set of enabled subcharts;
	// parses counts the times they were parsed.
	executors executors
	parses    atomic.Int64
	// instrument, when set (Instrument), is called on each executor's
	// templates once parsed.
	instrument func(*template.Template)
}

// Load loads the chart directory or .tgz at p, checks what Helm checks
// before an install (an application chart, its dependencies vendored
// under charts/, a schema stencil can check without the network), and
// rewrites its templates. Errors name the chart and the file.
func Load(p string) (*Chart, error) {
	loaded, err := loader.Load(p)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", p, err)
	}
	ch, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, fmt.Errorf("loading chart %s: invalid chart apiVersion (stencil, like helm install, takes charts of apiVersion v1 and v2)", p)
	}
	return New(ch, p)
}

// New is Load for a chart Helm already loaded from p (package entry loads
// each chart once). The rewrite works on a copy of loaded's chart tree:
// loaded itself is left as Helm loaded it.
func New(loaded *chartv2.Chart, p string) (*Chart, error) {
	ch := copyTree(loaded)
	var err error
	switch ch.Metadata.Type {
	case "", "application":
	default:
		return nil, fmt.Errorf("chart %s: %s charts are not installable", p, ch.Metadata.Type)
	}
	if err := checkDependencies(ch); err != nil {
		return nil, fmt.Errorf("chart %s: %w", p, err)
	}
	c := &Chart{ch: ch, path: p}
	var errs []error
	walkCharts(ch, func(sub *chartv2.Chart) {
		if err := checkSchema(sub); err != nil {
			errs = append(errs, fmt.Errorf("chart %s: %s: %w", p, sub.ChartFullPath()+"/values.schema.json", err))
		}
		for _, crd := range sub.CRDObjects() {
			c.crds = append(c.crds, crd.Filename)
		}
		prefix := sub.ChartFullPath() + "/"
		c.templates += len(sub.Templates)
		for i, f := range sub.Templates {
			if !isTemplate(f.Name) {
				continue
			}
			text, err := rewriteFile(prefix+f.Name, string(f.Data))
			if err != nil {
				errs = append(errs, fmt.Errorf("chart %s: %w", p, err))
				continue
			}
			cp := *f
			cp.Data = []byte(text)
			sub.Templates[i] = &cp
		}
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if c.schemas, err = compileSchemas(ch); err != nil {
		return nil, fmt.Errorf("chart %s: %w", p, err)
	}
	return c, nil
}

// isTemplate says whether a file under templates/ is text Helm renders
// (and so the rewrite must see): all are, NOTES.txt and partials too.
func isTemplate(name string) bool { return strings.HasPrefix(name, "templates/") }

// Name is the chart's name, as .Chart.Name.
func (c *Chart) Name() string { return c.ch.Name() }

// CRDs lists the files under crds/ that stencil does not install.
func (c *Chart) CRDs() []string { return slices.Clone(c.crds) }

// copyTree copies ch and the charts vendored under it, each with its own
// list of templates (the rewrite replaces entries of it); file contents
// are shared, never written.
func copyTree(ch *chartv2.Chart) *chartv2.Chart {
	cp := *ch
	cp.Templates = slices.Clone(ch.Templates)
	deps := make([]*chartv2.Chart, 0, len(ch.Dependencies()))
	for _, d := range ch.Dependencies() {
		deps = append(deps, copyTree(d))
	}
	cp.SetDependencies(deps...)
	return &cp
}

// walkCharts calls f for ch and every chart vendored under it.
func walkCharts(ch *chartv2.Chart, f func(*chartv2.Chart)) {
	f(ch)
	for _, d := range ch.Dependencies() {
		walkCharts(d, f)
	}
}

// checkDependencies is helm install's check: every dependency Chart.yaml
// names is vendored under charts/ (stencil never downloads one).
func checkDependencies(ch *chartv2.Chart) error {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !have[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dependencies %s are not in charts/: vendor them (helm dependency build) before pointing stencil at the chart", strings.Join(missing, ", "))
	}
	return nil
}

// checkSchema refuses a values.schema.json that refers outside itself:
// Helm's validator (santhosh-tekuri/jsonschema) would fetch an http(s)
// reference on every validation, and read a file: one from the
// controller's disk. Every keyword that refers to another document counts:
// $ref, $dynamicRef and $recursiveRef must point inside the file (#...),
// and $schema must name a draft the validator knows without loading it.
func checkSchema(ch *chartv2.Chart) error {
	if len(ch.Schema) == 0 {
		return nil
	}
	var doc any
	if err := json.Unmarshal(ch.Schema, &doc); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	var bad []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, key := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
				if ref, ok := v[key].(string); ok && !strings.HasPrefix(ref, "#") {
					bad = append(bad, key+" "+ref)
				}
			}
			if s, ok := v["$schema"].(string); ok && !knownDraft(s) {
				bad = append(bad, "$schema "+s)
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%s: stencil checks values against the schema without the network or the disk; inline the referenced schema (a $schema must name a JSON Schema draft: 4, 6, 7, 2019-09, 2020-12 or the latest)", strings.Join(bad, ", "))
	}
	return nil
}

// knownDraft reports whether s names a JSON Schema draft whose
// meta-schema the validator holds (http or https, with or without "#").
func knownDraft(s string) bool {
	s = strings.TrimSuffix(s, "#")
	s, ok := strings.CutPrefix(s, "http://")
	if !ok {
		if s, ok = strings.CutPrefix(s, "https://"); !ok {
			return false
		}
	}
	switch s {
	case "json-schema.org/schema", "json-schema.org/draft-04/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-07/schema",
		"json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema":
		return true
	}
	return false
}

// Release is what one render is for.
type Release struct {
	// Name and Namespace are the custom resource's.
	Name, Namespace string
	// Spec is the resource's spec (nil: none), the tenant's values.
	Spec map[string]any
	// Overrides are the entry's overrideValues, over the spec: --set
	// paths (a.b[0].c) to values, typed as helm-operator types them.
	Overrides map[string]string
	// Upgrade says the release was deployed before (.Release.IsUpgrade).
	Upgrade bool
	// Capabilities are the cluster's; nil: Helm's defaults.
	Capabilities *common.Capabilities
	// Budget bounds the render.
	Budget budget.Limits
	// TenantTemplates lets template text in the spec run where the chart
	// gives it to tpl; false prints it as the literal text it is.
	TenantTemplates bool
	// Reads are the objects the entry's declared reads found: what
	// Helm's lookup answers from (anything else finds nothing).
	Reads []map[string]any
	// spent is what the render's earlier passes counted: a second render
	// (a random function's check) goes on from it, so
	// that one render of a resource has one budget.
	spent int64
}

// Output is one render of a chart.
type Output struct {
	// Manifests are the rendered documents that are not hooks, in
	// Helm's install order, each named by its template.
	Manifests []Manifest
	// Hooks name the hooks and tests the chart rendered (not applied):
	// "Kind/name (events) from template".
	Hooks []string
	// Notes is the rendered NOTES.txt of the chart itself.
	Notes string
	// Steps is what the render counted against its budget.
	Steps int64
}

// Manifest is one rendered document.
type Manifest struct {
	// Template is the template it came from, as Helm names it.
	Template string
	// Body is its text, with placeholders.
	Body []byte
	// Object is the document decoded (engine.Decode): nil when it holds
	// nothing; Err is why it did not decode.
	Object any
	Err    error
	// kind orders it (Helm's install order).
	kind string
}

// Values returns the values given to the chart: the spec with the
// overrides written over it, as helm-operator writes them (strvals, the
// parser of --set, in sorted key order). The render coalesces the chart's
// values.yaml under them.
func Values(spec map[string]any, overrides map[string]string) (map[string]any, error) {
	vals := deepCopy(spec)
	if vals == nil {
		vals = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		if err := strvals.ParseInto(k+"="+overrides[k], vals); err != nil {
			return nil, fmt.Errorf("overrideValues %q: %w", k, err)
		}
	}
	return vals, nil
}

// Render renders the chart for one release. A render that called a
// function whose result differs per render (randAlphaNum, genCA ...) is
// rendered once more: if an object to apply differs between the two,
// the render fails naming the calls; a hook or test that differs does
// not matter, as stencil applies neither (podinfo names its test pods
// with randAlphaNum).
func (c *Chart) Render(ctx context.Context, rel Release) (*Output, error) {
	now := time.Now()
	out, e, err := c.render(ctx, rel, now)
	defer c.release(e)
	if err != nil {
		return nil, err
	}
	if len(e.p.random) == 0 {
		return out, nil
	}
	rel.spent = out.Steps
	again, e2, err := c.render(ctx, rel, now.Add(25*time.Hour+time.Minute+time.Second))
	defer c.release(e2)
	if err != nil {
		return nil, err
	}
	for i, m := range out.Manifests {
		if i >= len(again.Manifests) || e.st.Resolve(string(m.Body)) != e2.st.Resolve(string(again.Manifests[i].Body)) {
			return nil, e.p.randomError(m.Template)
		}
	}
	if len(again.Manifests) != len(out.Manifests) {
		return nil, e.p.randomError("")
	}
	return out, nil
}

// render renders the chart once, on an executor of the pool (nil when
// none could be had), which the caller releases once it no longer needs
// the render's placeholders.
func (c *Chart) render(_ context.Context, rel Release, clock time.Time) (*Output, *executor, error) {
	ch := copyChart(c.ch)
	// The values decide which subcharts are enabled, and so which
	// templates (which executor) the render runs; the taint, whose arena
	// is the executor's, comes after. Dependency processing reads the
	// values' content alone, tainted or not.
	plain, err := Values(rel.Spec, rel.Overrides)
	if err != nil {
		return nil, nil, err
	}
	if err := chartutil.ProcessDependencies(ch, plain); err != nil {
		return nil, nil, fmt.Errorf("processing dependencies: %w", err)
	}
	caps := rel.Capabilities
	if caps == nil {
		caps = common.DefaultCapabilities
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	opts := common.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: !rel.Upgrade, IsUpgrade: rel.Upgrade}
	if rel.Upgrade {
		opts.Revision = 2
	}
	// The templates the render runs, in Helm's parse order; the values
	// each is scoped to are placed once the values are known.
	templates := templateFiles(ch)
	keys := parseOrder(templates)
	e, err := c.executor(templates, keys, rel.Budget)
	if err != nil {
		return nil, nil, err
	}
	spec := rel.Spec
	if spec != nil {
		spec = e.taint.Value(spec).(map[string]any)
	}
	vals, err := Values(spec, rel.Overrides)
	if err != nil {
		return nil, e, err
	}
	top, err := cutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, true)
	if err != nil {
		return nil, e, err
	}
	values, ok := top["Values"].(common.Values)
	if !ok {
		return nil, e, fmt.Errorf("helm's values are %T, not common.Values", top["Values"])
	}
	if err := c.schemas.validate(ch, values.AsMap()); err != nil {
		return nil, e, fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%w", err)
	}
	p := &e.p
	p.clock, p.tenantTemplates, p.reads = clock, rel.TenantTemplates, rel.Reads
	if err := e.st.Meter().Charge(rel.spent); err != nil {
		return nil, e, fmt.Errorf("%w (with the render's earlier pass)", err)
	}
	files, err := e.run(allTemplates(ch, top), keys)
	if err != nil {
		return nil, e, p.renderError(err)
	}
	out := &Output{}
	notes := path.Join(ch.Name(), "templates", "NOTES.txt")
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if name == notes {
				out.Notes = strings.TrimSpace(e.st.Resolve(text))
			}
			delete(files, name)
		}
	}
	if out.Hooks, out.Manifests, err = sortManifests(files, &e.st); err != nil {
		return nil, e, err
	}
	out.Steps = e.st.Steps()
	return out, e, nil
}

// renderError is the error of a failed render: the refused function or
// the budget it went past, named plainly with the chart's template and
// line where the render was; otherwise Helm's own message, which names
// the template, line and column.
func (p *printer) renderError(err error) error {
	if p.refused != nil {
		return p.refused
	}
	msg := err.Error()
	var bound *budget.Error
	if errors.As(err, &bound) {
		return fmt.Errorf("%s%w", where(msg), bound)
	}
	for _, internal := range []string{valueFunc, resolveFunc, tplEndFunc, budget.StepFunc} {
		msg = strings.ReplaceAll(msg, " | "+internal, "")
	}
	if strings.Contains(msg, budget.ErrExceeded.Error()) {
		return fmt.Errorf("%w: %s", budget.ErrExceeded, strings.Replace(msg, budget.ErrExceeded.Error()+": ", "", 1))
	}
	return errors.New(msg)
}

// where is "template:line: " of the outermost template a text/template
// error names ("template: probe/templates/cm.yaml:6:7: executing ..."),
// "" when it names none. A bound reached inside tpl inside tpl is reported
// where the chart's own template called the first, not with every text
// on the way.
func where(msg string) string {
	rest, ok := strings.CutPrefix(msg, "template: ")
	if !ok {
		return ""
	}
	loc, _, ok := strings.Cut(rest, ": ")
	if !ok {
		return ""
	}
	if parts := strings.Split(loc, ":"); len(parts) >= 2 {
		loc = parts[0] + ":" + parts[1]
	}
	return loc + ": "
}

// copyChart copies ch deeply enough that Helm's dependency processing
// (which rewrites metadata, values and the list of subcharts) leaves ch
// as it was; file contents are shared, never written.
func copyChart(ch *chartv2.Chart) *chartv2.Chart {
	md := *ch.Metadata
	md.Dependencies = make([]*chartv2.Dependency, len(ch.Metadata.Dependencies))
	for i, d := range ch.Metadata.Dependencies {
		cp := *d
		cp.Tags = slices.Clone(d.Tags)
		cp.ImportValues = slices.Clone(d.ImportValues)
		md.Dependencies[i] = &cp
	}
	out := &chartv2.Chart{
		Raw: ch.Raw, Metadata: &md, Lock: ch.Lock, Templates: slices.Clone(ch.Templates),
		Values: deepCopy(ch.Values), Schema: ch.Schema, Files: ch.Files,
	}
	deps := make([]*chartv2.Chart, len(ch.Dependencies()))
	for i, d := range ch.Dependencies() {
		deps[i] = copyChart(d)
	}
	out.SetDependencies(deps...)
	return out
}

// deepCopy copies the maps and lists of values.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// Digest names the chart's content (every file, the templates as
// written): a changed digest is a chart change, for an entry's rollout.
func (c *Chart) Digest() string {
	h := sha256.New()
	for _, f := range c.ch.Raw {
		h.Write([]byte(f.Name + "\x00"))
		h.Write(f.Data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
