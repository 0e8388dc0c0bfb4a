package chart

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/budget"
)

// platformSecret is what the platform sets in overrideValues, at a path
// no chart prints: only a tenant's text run as a template, or a forged
// placeholder, could bring it into an object.
const platformSecret = "PLATFORM-SECRET-7f3a9c"

var secretOverrides = map[string]string{"platform.password": platformSecret, "tls.key": platformSecret}

// secretSpecs puts s where each chart takes a tenant's string: values,
// keys, and (text) bitnami's podLabels as YAML text, which it decodes with
// fromYaml and gives to tpl: labels are what that text says, so the field
// paths are compared without it.
func secretSpecs(s string, text bool) map[string]map[string]any {
	var podLabels any = map[string]any{"l": s}
	if text {
		podLabels = s
	}
	return map[string]map[string]any{
		"nginx": {"tls": map[string]any{"enabled": false}, "podLabels": podLabels, "commonAnnotations": map[string]any{s: "v"},
			"podAnnotations": map[string]any{"a": s}, "nameOverride": s, "image": map[string]any{"tag": s}},
		"mychart": {"nameOverride": s, "podAnnotations": map[string]any{"a": s}, "podLabels": map[string]any{s: "v"}, "image": map[string]any{"tag": s}},
		"podinfo": {"ui": map[string]any{"message": s}, "podAnnotations": map[string]any{s: "x"}, "image": map[string]any{"tag": s}},
	}
}

// FuzzChartSecret renders bitnami nginx, helm create's chart and podinfo
// with a fuzzed tenant string (marker fragments, escapes, quotes, comment
// and flow characters, NEL, BOM in the seeds) at every place a tenant
// sets one, and a platform secret in overrideValues. The secret is never
// in any object, hook or note; and every object of a render that is not
// refused has the field paths of a render with x's.
func FuzzChartSecret(f *testing.F) {
	enc := base64.StdEncoding.EncodeToString([]byte("{{ .Values.platform.password }}"))
	for _, s := range []string{
		"x", "{{ .Values.platform.password }}", `a: "\x7b\x7b .Values.platform.password }}"`, `a: "\u007b\u007b .Values.tls.key }}"`,
		"a: !!binary " + enc, "zzstencilvv00000000z", "zzstencilaaaaaaaaaaaaaaaav00000001z", "', --evil=true] #", "'}, enforce: privileged} #",
		"a\u0085b", "\ufeffa: b", "x\n  evil: yes", "{{ tpl .Values.platform.password . }}", "%7B%7B .Values.platform.password }}",
		"- a\n- b", "&a [*a, *a]", "\"q\" # c", "{\"a\": \"\\u007b\\u007b .Values.tls.key }}\"}",
	} {
		f.Add(s)
	}
	charts := vendoredCharts(f)
	limits := budget.Limits(config.RenderBudget{}.WithDefaults())
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 300 || !utf8.ValidString(s) || s == "" {
			return
		}
		text, hostile, plain := secretSpecs(s, true), secretSpecs(s, false), secretSpecs(strings.Repeat("x", len(s)), false)
		for name, c := range charts {
			for _, spec := range []map[string]any{text[name], hostile[name]} {
				rel := Release{Name: "demo", Namespace: "team-a", Spec: spec, Overrides: secretOverrides, Budget: limits}
				if out, err := c.Render(context.Background(), rel); err == nil {
					noSecret(t, name, s, out)
				}
			}
			out, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: hostile[name], Overrides: secretOverrides, Budget: limits})
			if err != nil {
				continue // refused: nothing applied
			}
			ref, err := c.Render(context.Background(), Release{Name: "demo", Namespace: "team-a", Spec: plain[name], Overrides: secretOverrides, Budget: limits})
			if err != nil {
				continue // the lengths alone fail the chart (a name over 63)
			}
			if len(out.Manifests) != len(ref.Manifests) {
				t.Fatalf("%s: %d objects with %q; %d with x's", name, len(out.Manifests), s, len(ref.Manifests))
			}
			names := map[string]bool{s: true, strings.Repeat("x", len(s)): true}
			for i, m := range out.Manifests {
				got, gerr := m.Object, m.Err
				want, werr := ref.Manifests[i].Object, ref.Manifests[i].Err
				if gerr != nil || werr != nil {
					continue // decoding fails the render in package templates
				}
				if g, w := fieldPaths(got, names), fieldPaths(want, names); !slices.Equal(g, w) {
					t.Fatalf("%s: %s with %q has fields\n%v\nwith x's\n%v", name, m.Template, s, g, w)
				}
			}
		}
	})
}

// vendoredCharts loads the public charts of testdata (bitnami nginx with
// common, helm create's chart, podinfo), by name, for the fuzz targets.
func vendoredCharts(f *testing.F) map[string]*Chart {
	f.Helper()
	charts := map[string]*Chart{}
	for _, name := range []string{"nginx", "mychart", "podinfo"} {
		c, err := Load(filepath.Join("testdata", "charts", name))
		if err != nil {
			f.Fatal(err)
		}
		charts[name] = c
	}
	return charts
}

// noSecret fails when the platform's secret is in any object, hook or
// note of out.
func noSecret(t *testing.T, name, s string, out *Output) {
	t.Helper()
	for _, m := range out.Manifests {
		if strings.Contains(string(m.Body), platformSecret) {
			t.Fatalf("%s: %s holds the platform's secret with the tenant's %q", name, m.Template, s)
		}
		if v, err := m.Object, m.Err; err == nil {
			leaves(v, m.Template, func(path, str string) {
				if strings.Contains(str, platformSecret) {
					t.Fatalf("%s: %s holds the platform's secret with the tenant's %q", name, path, s)
				}
			})
		}
	}
	for _, h := range append(out.Hooks, out.Notes) {
		if strings.Contains(h, platformSecret) {
			t.Fatalf("%s: a hook or the notes hold the platform's secret with the tenant's %q", name, s)
		}
	}
}
