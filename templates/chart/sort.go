package chart

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/templates/engine"
)

// sortManifests is Helm's releaseutil.SortManifests over documents
// decoded once: the files split into documents as Helm splits them, each
// document decoded (engine.Decode, which the render needs anyway) and its
// head (kind, name, annotations) read from the decoded object instead of
// a second YAML parse of its text, which cost a third of chart mode's
// render. Hooks are named, not applied; the rest come in Helm's install
// order, stable within a kind. Where the decoded head does not say what
// Helm's would (a document that does not decode, a head field that is not
// a string), Helm's own head parse of the text decides, errors included.
func sortManifests(files map[string]string, st *engine.State) (hooks []string, manifests []Manifest, err error) {
	type hook struct {
		kind, line string
	}
	var hs []hook
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		content := files[name]
		if strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(content) == "" {
			continue
		}
		for _, text := range splitDocuments(content) {
			m := Manifest{Template: name, Body: []byte(text + "\n")}
			m.Object, m.Err = engine.Decode(m.Body, st)
			h, ok := decodedHead(m.Object)
			if m.Err != nil || !ok {
				// Helm's head parse: the text as Helm would read it.
				var sh releaseutil.SimpleHead
				if err := yaml.Unmarshal([]byte(text), &sh); err != nil {
					return nil, nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
				}
				h = head{kind: sh.Kind}
				if sh.Metadata != nil {
					h.name, h.annotations = sh.Metadata.Name, sh.Metadata.Annotations
				}
			}
			hookTypes, isHook := h.annotations[release.HookAnnotation]
			if !isHook {
				m.kind = h.kind
				manifests = append(manifests, m)
				continue
			}
			var events []string
			known := true
			for t := range strings.SplitSeq(hookTypes, ",") {
				t = strings.ToLower(strings.TrimSpace(t))
				if t == "test-success" {
					t = release.HookTest.String()
				}
				if !knownHookEvent(t) {
					known = false
					break
				}
				events = append(events, t)
			}
			if !known {
				// Helm skips a document with an unknown hook event.
				continue
			}
			hs = append(hs, hook{kind: h.kind, line: fmt.Sprintf("%s/%s (%s) from %s", h.kind, st.Resolve(h.name), strings.Join(events, ","), name)})
		}
	}
	slices.SortStableFunc(manifests, func(a, b Manifest) int { return compareKinds(a.kind, b.kind) })
	slices.SortStableFunc(hs, func(a, b hook) int { return compareKinds(a.kind, b.kind) })
	for _, h := range hs {
		hooks = append(hooks, h.line)
	}
	return hooks, manifests, nil
}

// head is what Helm reads of a document before it sorts it.
type head struct {
	kind, name  string
	annotations map[string]string
}

// decodedHead reads the head from a decoded document; false when a field
// Helm reads as a string is something else (Helm's own parse then
// decides, failing as Helm fails).
func decodedHead(v any) (head, bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return head{}, v == nil
	}
	var h head
	if h.kind, ok = optionalString(obj["kind"]); !ok {
		return h, false
	}
	md, isMap := obj["metadata"].(map[string]any)
	if !isMap {
		return h, obj["metadata"] == nil
	}
	if h.name, ok = optionalString(md["name"]); !ok {
		return h, false
	}
	switch a := md["annotations"].(type) {
	case nil:
	case map[string]any:
		h.annotations = make(map[string]string, len(a))
		for k, v := range a {
			s, ok := v.(string)
			if !ok {
				return h, false
			}
			h.annotations[k] = s
		}
	default:
		return h, false
	}
	return h, true
}

func optionalString(v any) (string, bool) {
	if v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

// splitDocuments splits a rendered file into documents as Helm's
// releaseutil.SplitManifests does, in order: at every "---" that starts a
// line, with the spaces and tabs after it (so "---apiVersion: v1" starts
// a document too), each document without its leading white space, blank
// ones dropped. Helm's regexp split was a sixth of what was left of the
// chart render; FuzzSplitDocumentsAsHelm holds the two equal.
func splitDocuments(s string) []string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	var docs []string
	add := func(d string) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, strings.TrimLeftFunc(d, unicode.IsSpace))
		}
	}
	begin := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "---") {
			j := i + 3
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			add(s[begin:i])
			begin, i = j, j
		}
		next := strings.IndexByte(s[i:], '\n')
		if next < 0 {
			break
		}
		i += next + 1
	}
	add(s[begin:])
	return docs
}

// knownHookEvent reports whether e is one of Helm's hook events.
func knownHookEvent(e string) bool {
	switch release.HookEvent(e) {
	case release.HookPreInstall, release.HookPostInstall, release.HookPreDelete, release.HookPostDelete,
		release.HookPreUpgrade, release.HookPostUpgrade, release.HookPreRollback, release.HookPostRollback, release.HookTest:
		return true
	}
	return false
}

// installRank is the place of each kind in Helm's install order.
var installRank = func() map[string]int {
	m := make(map[string]int, len(releaseutil.InstallOrder))
	for i, k := range releaseutil.InstallOrder {
		m[k] = i
	}
	return m
}()

// compareKinds orders kinds as Helm's kind sorter does: known kinds by
// install order, then unknown kinds by name; equal kinds keep their order.
func compareKinds(a, b string) int {
	ra, aok := installRank[a]
	rb, bok := installRank[b]
	switch {
	case aok && bok:
		return ra - rb
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}
