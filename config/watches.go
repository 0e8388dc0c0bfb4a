package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
	"stencil.dev/stencil/config/decode"
	"stencil.dev/stencil/config/snapshot"
)

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
	// Identity is stencil's extension of the watches file: the account
	// the children are written as, as an entry's identity in a config
	// file. helm-operator ignores it.
	Identity *Identity `json:"identity,omitempty"`
}

// PluralResolver finds the resource (plural) that serves a kind, through
// discovery: a plural is never guessed from a kind.
type PluralResolver func(schema.GroupVersionKind) (string, error)

// GVK returns the kind the watch serves.
func (w Watch) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
}

// LoadWatches reads helm-operator's watches.yaml at path into a config
// of chart entries, resolving each kind's plural with resolve, and
// validates it as a config file is validated. A relative chart path is
// resolved against the file's directory, else (helm-operator's meaning)
// against the working directory.
func LoadWatches(path string, resolve PluralResolver) (*Config, error) {
	snap, err := TakeSnapshot(path, true)
	if err != nil {
		return nil, err
	}
	return LoadSnapshot(snap, resolve)
}

// loadWatches is LoadSnapshot of a watches file.
func loadWatches(snap *snapshot.Snapshot, resolve PluralResolver) (*Config, error) {
	path := snap.Path
	watches, err := parseWatches(path, snap.Config)
	if err != nil {
		return nil, err
	}
	label := func(i int) string { return fmt.Sprintf("watches[%d] (%s)", i, watches[i].GVK()) }
	cfg := &Config{Path: path, Dir: filepath.Dir(path), Resources: make([]Resource, len(watches)), label: label, snap: snap}
	var errs field.ErrorList
	for i, w := range watches {
		r, err := w.resource(snap, field.NewPath("resources").Index(i), resolve)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Resources[i] = r
	}
	if len(errs) > 0 {
		return nil, toErrors(path, label, errs)
	}
	if err := cfg.Errors(validate(cfg, nil, nil)); err != nil {
		return nil, err
	}
	return cfg, nil
}

// resource is the chart entry the watch at p in snap's watches file
// means.
func (w Watch) resource(snap *snapshot.Snapshot, p *field.Path, resolve PluralResolver) (Resource, *field.Error) {
	if w.Version == "" || w.Kind == "" {
		return Resource{}, field.Required(p, "version and kind are required")
	}
	plural, err := resolve(w.GVK())
	if err != nil {
		return Resource{}, &field.Error{Type: field.ErrorTypeNotFound, Field: p.Child("kind").String(), BadValue: err, Detail: err.Error()}
	}
	r := Resource{Group: w.Group, Version: w.Version, Resource: plural}
	if w.Chart != "" {
		r.Chart = snap.Charts[w.Chart]
	}
	r.Identity = w.Identity
	if len(w.OverrideValues) > 0 {
		r.OverrideValues = Values(maps.Clone(w.OverrideValues))
	}
	if w.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			return Resource{}, &field.Error{Type: field.ErrorTypeInvalid, Field: p.Child("selector").String(), BadValue: err, Detail: err.Error()}
		}
		if !sel.Empty() {
			r.Selector = sel.String()
		}
	}
	return r, nil
}

// readWatches reads a watches file as helm-operator does: unknown fields
// are ignored.
func readWatches(path string) ([]Watch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches: %w", err)
	}
	return parseWatches(path, data)
}

// parseWatches parses the watches file at path, data.
func parseWatches(path string, data []byte) ([]Watch, error) {
	var watches []Watch
	if err := yaml.Unmarshal(data, &watches); err != nil {
		required := strings.Join(decode.FieldNames(reflect.TypeFor[Watch](), true), ", ")
		return nil, &FieldError{File: path, Err: fmt.Errorf("not a watches file (a list of {%s}): %w", required, err)}
	}
	if len(watches) == 0 {
		return nil, &FieldError{File: path, Err: errors.New("no watches")}
	}
	return watches, nil
}

// WatchedCharts lists the chart paths a watches file names, resolved as
// LoadWatches resolves them, without asking the cluster anything: what a
// reload watches for changes.
func WatchedCharts(path string) []string {
	watches, err := readWatches(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, w := range watches {
		if w.Chart != "" {
			out = append(out, watchedChart(path, w.Chart, exists))
		}
	}
	return out
}

// watchedChart resolves a watches file's chart path: absolute, or
// relative to the file's directory, else (helm-operator's meaning) to
// the working directory (exists says where a path is).
func watchedChart(file, chart string, exists func(string) bool) string {
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
