package templates

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FuzzReadsStayInTheNamespace: whatever a tenant writes in the spec
// fields a read's name and selector are computed from (a path, another
// namespace's name, a label selector's syntax, template text, very long
// text), ResolveReads asks only in the resource's namespace (or the
// platform's fixed one), never panics, and a Secret's data never reaches
// the render.
func FuzzReadsStayInTheNamespace(f *testing.F) {
	for _, seed := range [][2]string{
		{"db-pass", "gold"}, {"", ""}, {"../other/db", "a,b"}, {"other/db-pass", "gold,tier!=x"},
		{"db-pass\n", "gold "}, {"{{ .Values }}", "{{ . }}"}, {strings.Repeat("a", 300), strings.Repeat("b", 70)},
		{"kube-system", "in (a, b)"}, {"DB-PASS", "-gold"}, {"db.pass", "gold_1"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, err := loadReadsSet(f, `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Name }}}
data:
  keys: {{ with read "password" }}{{ keys .data | sortAlpha | join "," }}{{ end }}
  peers: {{ range read "peers" }}{{ .metadata.name }} {{ end }}
`)
	if err != nil {
		f.Fatal(err)
	}
	objs := []*unstructured.Unstructured{
		readObject("v1", "Secret", "team-a", "db-pass", nil, map[string]any{"data": map[string]any{"password": "c2VjcmV0"}}),
		readObject("v1", "Secret", "other", "db-pass", nil, map[string]any{"data": map[string]any{"password": "b3RoZXI="}}),
		readObject("v1", "Secret", "kube-system", "admin", nil, map[string]any{"data": map[string]any{"token": "dG9rZW4="}}),
		readObject("apps.example.com/v1beta1", "WebApp", "team-a", "alpha", map[string]any{"tier": "gold"}, nil),
		readObject("apps.example.com/v1beta1", "WebApp", "other", "beta", map[string]any{"tier": "gold"}, nil),
	}
	f.Fuzz(func(t *testing.T, secret, tier string) {
		src := &fakeReads{objs: objs, served: map[schema.GroupKind]bool{{Group: "apps.example.com", Kind: "WebApp"}: true}}
		p := parent()
		p.Spec = map[string]any{"passwordSecret": secret, "tier": tier}
		reads, err := s.ResolveReads(p, src)
		if err != nil {
			return // a name that renders past the bound: refused, nothing read
		}
		for _, a := range src.asked {
			if !strings.Contains(a, " team-a/") && !strings.HasPrefix(a, "ConfigMap stencil-system/") {
				t.Fatalf("spec %q/%q made a read ask %s", secret, tier, a)
			}
		}
		for _, ref := range reads.Refs {
			if ref.Namespace != "team-a" && ref.Namespace != "stencil-system" {
				t.Fatalf("spec %q/%q read %s", secret, tier, ref)
			}
		}
		p.Reads = reads.Values
		r, err := s.RenderHere(p, nil, nil)
		if err != nil {
			return
		}
		for _, c := range r.Children {
			text := fmt.Sprint(c.Object["data"])
			for _, secretText := range []string{"c2VjcmV0", "b3RoZXI=", "dG9rZW4=", "beta"} {
				if strings.Contains(text, secretText) {
					t.Fatalf("spec %q/%q: the render holds %q: %s", secret, tier, secretText, text)
				}
			}
		}
	})
}
