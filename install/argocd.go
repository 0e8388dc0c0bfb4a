package install

// Argo CD's health checks for the configured kinds (stencil argocd).
//
// Argo CD keys a health check by group and Kind, but the config names each
// resource by its plural, and stencil never guesses one from the other
// ("webapps" is a WebApp, not a Webapp). Offline, the one place that says is
// the CRD, so the kinds come from the CRD manifests.

import (
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// HealthLua is Argo CD's health check for every stencil resource: they share
// one status contract, so one script serves every kind. Argo CD runs custom
// checks without Lua's string, math and io libraries, so it uses only the
// base and table ones.
//
//go:embed argocd_health.lua
var HealthLua string

// ArgoCDHealthChecks returns argocd-cm data entries, one health check per kind, as
// YAML with literal block scalars so the Lua reads as written.
func ArgoCDHealthChecks(gks []schema.GroupKind) string {
	var b strings.Builder
	for _, gk := range gks {
		fmt.Fprintf(&b, "%s: |\n", ArgoCDHealthKey(gk))
		for _, line := range strings.SplitAfter(HealthLua, "\n") {
			if strings.TrimSpace(line) == "" {
				b.WriteString(strings.TrimLeft(line, " \t"))
				continue
			}
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// ArgoCDHealthKey is the argocd-cm key of gk's health check; Argo CD names a kind
// of the core group by its Kind alone.
func ArgoCDHealthKey(gk schema.GroupKind) string {
	if gk.Group == "" {
		return "resource.customizations.health." + gk.Kind
	}
	return "resource.customizations.health." + gk.Group + "_" + gk.Kind
}

// CRDKinds reads the CustomResourceDefinitions in path, a file or the
// manifests of a directory (not its subdirectories, as kubectl apply -f), and
// returns the kind each defines. Other documents are skipped, so a directory
// may also hold the config file and samples.
func CRDKinds(path string) (map[schema.GroupResource]string, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("reading CRDs: %w", err)
	} else if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		files = nil
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
	}
	kinds := map[schema.GroupResource]string{}
	from := map[schema.GroupResource]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		objs, err := view.DecodeObjects(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, u := range objs {
			gvk := u.GroupVersionKind()
			if gvk.Group != "apiextensions.k8s.io" || gvk.Kind != "CustomResourceDefinition" {
				continue
			}
			group, errGroup := templates.RequiredString(u.Object, "spec", "group")
			plural, errPlural := templates.RequiredString(u.Object, "spec", "names", "plural")
			kind, errKind := templates.RequiredString(u.Object, "spec", "names", "kind")
			if err := cmp.Or(errGroup, errPlural, errKind); err != nil {
				return nil, fmt.Errorf("%s: CustomResourceDefinition %q: %w", file, u.GetName(), err)
			}
			gr := schema.GroupResource{Group: group, Resource: plural}
			if old, ok := kinds[gr]; ok && old != kind {
				return nil, fmt.Errorf("%s: CustomResourceDefinition %q names %s kind %s, %s names it %s", file, u.GetName(), gr, kind, from[gr], old)
			}
			kinds[gr], from[gr] = kind, file
		}
	}
	return kinds, nil
}

// ArgoCDKinds returns the group and Kind of each of cfg's entries, read
// from the CRDs in crds (a file or a directory; cfg's directory when
// empty). Every entry without a CRD there is named in the error, and then
// no kinds are returned: half a set of health checks pasted into argocd-cm
// looks complete.
func ArgoCDKinds(cfg *config.Config, crds string) ([]schema.GroupKind, error) {
	if crds == "" {
		crds = cfg.Dir
	}
	kinds, err := CRDKinds(crds)
	if err != nil {
		return nil, err
	}
	var gks []schema.GroupKind
	var errs []error
	for i, r := range cfg.Resources {
		gr := r.GVR().GroupResource()
		kind, ok := kinds[gr]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s: no CustomResourceDefinition for %s in %s (name the CRDs with --crds)", cfg.Path, config.EntryName(i, r), gr, crds))
			continue
		}
		gks = append(gks, schema.GroupKind{Group: r.Group, Kind: kind})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return gks, nil
}
