package templates

import (
	"fmt"
	"os"
	"testing"
	"text/template"
	"time"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/funcs"
	"stencil.dev/stencil/templates/view"
)

// textRenderer is the renderer before structure-safe rendering, kept as
// the baseline of BenchmarkRender: the same templates and functions, the
// output decoded as text, no placeholders.
type textRenderer struct {
	set  *Set
	root *template.Template
}

func newTextRenderer(tb testing.TB, cfg *config.Config, set *Set) *textRenderer {
	tb.Helper()
	root := template.New("").Option("missingkey=error").Funcs(funcs.Hermetic())
	res := set.Resource()
	for _, name := range append(append([]string{}, res.Helpers...), res.TemplatePaths()...) {
		data, err := os.ReadFile(cfg.TemplatePath(name))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := root.New(name).Parse(string(data)); err != nil {
			tb.Fatal(err)
		}
	}
	return &textRenderer{set: set, root: root}
}

func (r *textRenderer) render(parent *view.Object) (int, error) {
	n := 0
	for _, name := range r.set.Resource().TemplatePaths() {
		out, err := engine.Execute(r.root, name, parent, r.set.Budget())
		if err != nil {
			return 0, err
		}
		docs, err := splitDocuments(out)
		if err != nil {
			return 0, err
		}
		for _, doc := range docs {
			if _, err := r.set.childText(doc.body, parent); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// BenchmarkRender measures the render cost per resource of the example
// WebApp (Deployment, Service, ConfigMap, PDB) with structure-safe
// rendering against the text renderer it replaced, in the same run, and
// reports the ratio (target: within 1.3x); and the render budget's cost,
// against the same renderer without it (target: within 1.05x).
func BenchmarkRender(b *testing.B) {
	// Not both paths, as the other tests do: the render as it runs.
	defer func(v bool) { verifyFastPath = v }(verifyFastPath)
	verifyFastPath = false
	cfg, err := config.Load("../crds/stencil.yaml")
	if err != nil {
		b.Fatal(err)
	}
	set := exampleSets(b)["webapp"]
	unbudgeted, err := Load(cfg, set.Resource(), Options{unbudgeted: true})
	if err != nil {
		b.Fatal(err)
	}
	parent := sampleParent(b, "webapp.yaml", set.Resource().GVR())
	text := newTextRenderer(b, cfg, set)
	want, err := text.render(parent)
	if err != nil {
		b.Fatal(err)
	}
	per := map[string]time.Duration{}
	for _, c := range []struct {
		name   string
		render func() (int, error)
	}{
		{"text", func() (int, error) { return text.render(parent) }},
		{"unbudgeted", func() (int, error) { c, err := unbudgeted.Render(parent); return len(c), err }},
		{"safe", func() (int, error) { c, err := set.Render(parent); return len(c), err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				n, err := c.render()
				if err != nil || n != want {
					b.Fatalf("%d children, %v; want %d", n, err, want)
				}
			}
			per[c.name] = time.Since(start) / time.Duration(b.N)
		})
	}
	if per["text"] > 0 && per["safe"] > 0 {
		ratio := float64(per["safe"]) / float64(per["text"])
		fmt.Printf("BenchmarkRender: %d children per resource; text %s, safe %s per resource: %.2fx the text renderer\n",
			want, per["text"], per["safe"], ratio)
	}
	if per["unbudgeted"] > 0 && per["safe"] > 0 {
		fmt.Printf("BenchmarkRender: with the render budget %s, without %s per resource: %.3fx (target: at most 1.05x)\n",
			per["safe"], per["unbudgeted"], float64(per["safe"])/float64(per["unbudgeted"]))
	}
}
