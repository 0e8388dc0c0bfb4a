package entry

import (
	"bufio"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/kinds"
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

// chartKinds returns the child kinds the chart can render, by its
// templates' text (root and vendored subcharts), sorted; allowGrants keeps
// the kinds that grant permissions.
func chartKinds(ch *chartv2.Chart, allowGrants bool) []config.ChildKind {
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
	var out []config.ChildKind
	for gvk := range seen {
		gk := gvk.GroupKind()
		if kinds.IsClusterScoped(gk) || kinds.GrantsPermissions(gk) && !allowGrants {
			continue
		}
		out = append(out, config.ChildKind{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind})
	}
	slices.SortFunc(out, func(a, b config.ChildKind) int {
		return strings.Compare(a.APIVersion+" "+a.Kind, b.APIVersion+" "+b.Kind)
	})
	return out
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
