package config

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// Chart entries (chart mode): an entry that names a Helm chart instead of
// templates. Its child kinds, when it lists none, are the namespaced kinds
// the chart's templates name: every top-level `kind:` of a template,
// with its literal apiVersion, or, where the apiVersion is computed (a
// chart that picks one by .Capabilities), the version client-go prefers
// for that kind. Kinds outside client-go's scheme need a literal
// apiVersion. Cluster-scoped kinds are left out (rendering one fails,
// naming it), and so are kinds that grant permissions unless the entry
// allows them.

var (
	topKind       = regexp.MustCompile(`^kind:\s*["']?([A-Za-z][A-Za-z0-9]*)["']?\s*(#.*)?$`)
	topAPIVersion = regexp.MustCompile(`^apiVersion:\s*["']?([a-z0-9][a-z0-9./-]*)["']?\s*(#.*)?$`)
)

// ChartKinds returns the child kinds the chart at path can render, by its
// templates' text (root and vendored subcharts), sorted; allowGrants keeps
// the kinds that grant permissions.
func ChartKinds(path string, allowGrants bool) ([]ChildKind, error) {
	loaded, err := loader.Load(path)
	if err != nil {
		return nil, err
	}
	ch, ok := loaded.(*chartv2.Chart)
	if !ok {
		return nil, errors.New("invalid chart apiVersion (charts of apiVersion v1 and v2 are served)")
	}
	seen := map[schema.GroupVersionKind]bool{}
	var walk func(c *chartv2.Chart)
	walk = func(c *chartv2.Chart) {
		for _, f := range c.Templates {
			if strings.HasPrefix(filepath.Base(f.Name), "_") || strings.HasSuffix(f.Name, "NOTES.txt") {
				continue
			}
			for _, gvk := range templateKinds(string(f.Data)) {
				seen[gvk] = true
			}
		}
		for _, d := range c.Dependencies() {
			walk(d)
		}
	}
	walk(ch)
	var out []ChildKind
	for gvk := range seen {
		gk := gvk.GroupKind()
		if clusterScoped[gk] || grantsPermissions[gk] && !allowGrants {
			continue
		}
		out = append(out, ChildKind{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind})
	}
	slices.SortFunc(out, func(a, b ChildKind) int { return strings.Compare(a.APIVersion+" "+a.Kind, b.APIVersion+" "+b.Kind) })
	return out, nil
}

// templateKinds reads the kinds one template names at the top level of
// its documents, each with the apiVersion of its document when literal.
func templateKinds(text string) []schema.GroupVersionKind {
	var (
		out        []schema.GroupVersionKind
		apiVersion string
		kinds      []string
		hook       bool
	)
	flush := func() {
		// A hook or a test is not applied: its kinds are not children.
		for _, k := range kinds {
			if gvk, ok := resolveKind(apiVersion, k); ok && !hook {
				out = append(out, gvk)
			}
		}
		apiVersion, kinds, hook = "", nil, false
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case strings.HasPrefix(line, "---"):
			flush()
		case topAPIVersion.MatchString(line):
			apiVersion = topAPIVersion.FindStringSubmatch(line)[1]
		case topKind.MatchString(line):
			kinds = append(kinds, topKind.FindStringSubmatch(line)[1])
		case strings.Contains(line, "helm.sh/hook"):
			hook = true
		}
	}
	flush()
	return out
}

// resolveKind gives kind its GroupVersionKind: apiVersion when literal,
// else client-go's preferred version of the group that serves the kind.
func resolveKind(apiVersion, kind string) (schema.GroupVersionKind, bool) {
	if apiVersion != "" {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err == nil {
			return gv.WithKind(kind), true
		}
	}
	var groups []string
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Kind == kind && gvk.Version != "__internal" && !slices.Contains(groups, gvk.Group) && gvk.Group != "extensions" {
			groups = append(groups, gvk.Group)
		}
	}
	if len(groups) == 0 {
		return schema.GroupVersionKind{}, false
	}
	// The core group first (Event is also events.k8s.io's).
	slices.Sort(groups)
	versions := scheme.Scheme.PrioritizedVersionsForGroup(groups[0])
	for _, v := range versions {
		if scheme.Scheme.Recognizes(v.WithKind(kind)) {
			return v.WithKind(kind), true
		}
	}
	return schema.GroupVersionKind{}, false
}

// Watch is one entry of helm-operator's watches.yaml, as helm-operator
// reads it (unknown fields ignored).
type Watch struct {
	// Group, Version and Kind name the custom resource.
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Chart is the chart directory or .tgz.
	Chart string `json:"chart"`
	// OverrideValues are --set paths written over the resource's spec.
	OverrideValues map[string]string `json:"overrideValues,omitempty"`
	// Selector limits the custom resources served.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// WatchDependentResources, ReconcilePeriod and
	// MaxConcurrentReconciles are read and not used: stencil always
	// watches the children, resyncs on --resync and runs --workers.
	WatchDependentResources *bool            `json:"watchDependentResources,omitempty"`
	ReconcilePeriod         *metav1.Duration `json:"reconcilePeriod,omitempty"`
	MaxConcurrentReconciles *int             `json:"maxConcurrentReconciles,omitempty"`
}

// PluralResolver finds the resource (plural) that serves a kind, through
// discovery: a plural is never guessed from a kind.
type PluralResolver func(schema.GroupVersionKind) (string, error)

// LoadWatches reads helm-operator's watches.yaml at path into a config
// of chart entries, resolving each kind's plural with resolve, and
// validates it as a config file is validated. A relative chart path is
// resolved against the file's directory, else (helm-operator's meaning)
// against the working directory.
func LoadWatches(path string, resolve PluralResolver) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches: %w", err)
	}
	var watches []Watch
	if err := yaml.Unmarshal(data, &watches); err != nil {
		return nil, &FieldError{File: path, Err: fmt.Errorf("not a watches file (a list of {group, version, kind, chart}): %w", err)}
	}
	if len(watches) == 0 {
		return nil, &FieldError{File: path, Err: errors.New("no watches")}
	}
	var (
		errs    []error
		entries []map[string]any
	)
	for i, w := range watches {
		name := fmt.Sprintf("watches[%d] (%s)", i, schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind})
		if w.Version == "" || w.Kind == "" {
			errs = append(errs, &FieldError{File: path, Entry: name, Err: errors.New("version and kind are required")})
			continue
		}
		plural, err := resolve(schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind})
		if err != nil {
			errs = append(errs, &FieldError{File: path, Entry: name, Field: "kind", Err: err})
			continue
		}
		chart := w.Chart
		if chart != "" {
			chart = watchedChart(path, chart)
		}
		e := map[string]any{"group": w.Group, "version": w.Version, "resource": plural, "chart": chart}
		if len(w.OverrideValues) > 0 {
			e["overrideValues"] = w.OverrideValues
		}
		if w.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(w.Selector)
			if err != nil {
				errs = append(errs, &FieldError{File: path, Entry: name, Field: "selector", Err: err})
				continue
			}
			if !sel.Empty() {
				e["selector"] = sel.String()
			}
		}
		entries = append(entries, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	doc, err := yaml.Marshal(map[string]any{"resources": entries})
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, doc)
}

// Values are an entry's overrideValues: --set paths to scalars, kept as
// the text helm-operator's strvals types.
type Values map[string]string

// decodeJSON reads a mapping of scalars, each as its printed text.
func (v *Values) decodeJSON(_ *decoder, raw json.RawMessage, p *field.Path) field.ErrorList {
	var m map[string]json.RawMessage
	if jsonKind(raw) != "a mapping" || json.Unmarshal(raw, &m) != nil {
		return field.ErrorList{field.TypeInvalid(p, nil, "must be a mapping of --set paths to values, not "+jsonKind(raw))}
	}
	*v = make(Values, len(m))
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		text, ok := scalarText(m[k])
		if !ok {
			errs = append(errs, field.TypeInvalid(p.Child(k), nil, "must be a scalar (a --set value), not "+jsonKind(m[k])))
			continue
		}
		(*v)[k] = text
	}
	return errs
}

// checkChart says whether path is a chart directory or archive.
func checkChart(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return &missingFileError{resolved: path, err: err}
	case st.IsDir():
		if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err != nil {
			return fmt.Errorf("%s is a directory without Chart.yaml", path)
		}
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is neither a chart directory nor a .tgz", path)
	}
	return nil
}

// WatchedCharts lists the chart paths a watches file names, resolved as
// LoadWatches resolves them, without asking the cluster anything: what a
// reload watches for changes.
func WatchedCharts(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var watches []Watch
	if yaml.Unmarshal(data, &watches) != nil {
		return nil
	}
	var out []string
	for _, w := range watches {
		if w.Chart != "" {
			out = append(out, watchedChart(path, w.Chart))
		}
	}
	return out
}

// watchedChart resolves a watches file's chart path: absolute, or
// relative to the file's directory, else (helm-operator's meaning) to
// the working directory.
func watchedChart(file, chart string) string {
	if filepath.IsAbs(chart) {
		return chart
	}
	beside := filepath.Join(filepath.Dir(file), chart)
	if !exists(beside) {
		if abs, err := filepath.Abs(chart); err == nil && exists(abs) {
			return abs
		}
	}
	// Absolute: the config made of the watches resolves paths against
	// the watches file's directory again.
	if abs, err := filepath.Abs(beside); err == nil {
		return abs
	}
	return beside
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
