package install

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/snapshot"
	"stencil.dev/stencil/controller/reload"
)

// copyDir copies the tree at from to to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// everyFileConfig writes a config naming a file of every kind: templates,
// a helper, a status template, and a chart with a subchart and a
// values.schema.json; it returns the config's path.
func everyFileConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "crds", "webapp"), filepath.Join(dir, "webapp"))
	copyDir(t, filepath.Join("..", "templates", "chart", "testdata", "charts", "nginx"), filepath.Join(dir, "charts", "nginx"))
	if err := os.WriteFile(filepath.Join(dir, "webapp", "_helpers.tpl"), []byte(`{{ define "x" }}x{{ end }}`), 0o644); err != nil {
		t.Fatal(err)
	}
	text := `resources:
  - group: apps.example.com
    version: v1
    resource: webapps
    helpers: [webapp/_helpers.tpl]
    templates: [webapp/deployment.yaml.tmpl, webapp/service.yaml.tmpl]
    statusTemplate: webapp/status.yaml.tmpl
  - group: web.example.com
    version: v1
    resource: nginxes
    chart: charts/nginx
`
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEveryNamedFileIsWatchedAndPacked: every file the config names
// (config.Files, charts expanded as Helm reads them) is packed by stencil
// manifests at its path, and a change to it changes the reload poll's
// fingerprint: one list serves both.
func TestEveryNamedFileIsWatchedAndPacked(t *testing.T) {
	path := everyFileConfig(t)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := configFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range packed {
		paths = append(paths, f.path)
	}
	var named []string
	kinds := map[string]bool{}
	for _, f := range cfg.Files() {
		files := []string{f.Path}
		if f.Chart {
			if files, err = snapshot.ChartFiles(f.Path); err != nil {
				t.Fatal(err)
			}
		}
		kinds[f.Field[strings.Index(f.Field, ".")+1:]] = true
		named = append(named, files...)
	}
	for _, want := range []string{"helpers[0]", "templates[1]", "statusTemplate", "chart"} {
		if !kinds[want] {
			t.Errorf("config.Files names no %s", want)
		}
	}
	for _, sub := range []string{"charts/nginx/charts/common/Chart.yaml", "charts/nginx/values.schema.json", "webapp/_helpers.tpl"} {
		if !slices.Contains(paths, sub) {
			t.Errorf("manifests does not pack %s", sub)
		}
	}
	for _, file := range named {
		rel, _ := filepath.Rel(cfg.Dir, file)
		if !slices.Contains(paths, filepath.ToSlash(rel)) {
			t.Errorf("%s is named but not packed", rel)
		}
		before := reload.Fingerprint(path)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if reload.Fingerprint(path) == before {
			t.Errorf("a change to %s does not change the reload fingerprint", rel)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(named) < 10 {
		t.Errorf("only %d files named", len(named))
	}
}

// TestPackedTreeEdges: what a platform team's repository holds. A link to
// a file outside the config's directory is refused, naming the link; a
// chart that is a link to a directory inside it is packed at the link's
// path; a name longer than a ConfigMap key gets a valid key; names that
// are not UTF-8 are refused, naming the file.
func TestPackedTreeEdges(t *testing.T) {
	load := func(path string) *config.Config {
		t.Helper()
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Run("link outside", func(t *testing.T) {
		path := everyFileConfig(t)
		dir := filepath.Dir(path)
		secret := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(secret, []byte("token: admin"), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "charts", "nginx", "templates", "extra.yaml")
		if err := os.Symlink(secret, link); err != nil {
			t.Fatal(err)
		}
		_, err := configFiles(load(path))
		if err == nil || !strings.Contains(err.Error(), link+" is a link to "+secret+", outside") || !strings.Contains(err.Error(), "resources[1].chart") {
			t.Errorf("a link to a file outside: %v", err)
		}
	})
	t.Run("linked chart directory", func(t *testing.T) {
		path := everyFileConfig(t)
		dir := filepath.Dir(path)
		if err := os.Rename(filepath.Join(dir, "charts", "nginx"), filepath.Join(dir, "nginx-src")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "nginx-src"), filepath.Join(dir, "charts", "nginx")); err != nil {
			t.Fatal(err)
		}
		files, err := configFiles(load(path))
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range files {
			paths = append(paths, f.path)
		}
		if !slices.Contains(paths, "charts/nginx/Chart.yaml") || !slices.Contains(paths, "charts/nginx/charts/common/Chart.yaml") {
			t.Errorf("the linked chart is not packed at its path: %v", paths)
		}
	})
	t.Run("long name", func(t *testing.T) {
		path := everyFileConfig(t)
		dir := filepath.Dir(path)
		long := strings.Repeat("d", 200) + "/" + strings.Repeat("f", 100) + ".yaml"
		if err := os.MkdirAll(filepath.Join(dir, "charts", "nginx", "templates", filepath.Dir(long)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "charts", "nginx", "templates", long), []byte("# x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := configFiles(load(path))
		if err != nil {
			t.Fatal(err)
		}
		cms, err := packConfigMaps(files, "stencil-system")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, cm := range cms {
			for _, it := range cm.items {
				if msgs := validation.IsConfigMapKey(it.Key); len(msgs) > 0 {
					t.Errorf("key %q of %s: %v", it.Key, it.Path, msgs)
				}
				found = found || it.Path == "charts/nginx/templates/"+long
			}
		}
		if !found {
			t.Error("the long name is not mounted at its path")
		}
	})
	t.Run("not UTF-8", func(t *testing.T) {
		path := everyFileConfig(t)
		dir := filepath.Dir(path)
		for _, name := range []string{"a\xff.yaml", "a\xfe.yaml"} {
			if err := os.WriteFile(filepath.Join(dir, "charts", "nginx", "templates", name), []byte("# x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := configFiles(load(path))
		if err == nil || !strings.Contains(err.Error(), `a\xfe.yaml": a file name that is not UTF-8`) {
			t.Errorf("names that are not UTF-8: %v", err)
		}
	})
}
