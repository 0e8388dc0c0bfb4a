package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
	"stencil.dev/stencil/config"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/templates"
)

// TestDeployConfigIsTheExampleConfig: deploy/ mounts crds/stencil.yaml and
// its templates, the one copy, as the ConfigMap crds/kustomization.yaml
// generates. Every file the config names is a key of that ConfigMap (its
// path with "-" for "/") and an item of the config volume in
// deploy/base/deployment.yaml that maps the key back to the path, and nothing
// else is; the ClusterRole in deploy/ is what stencil rbac prints for it.
func TestDeployConfigIsTheExampleConfig(t *testing.T) {
	cfg, err := config.Load("../../crds/stencil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := templates.LoadAll(cfg, templates.Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"stencil.yaml=stencil.yaml"}
	for _, r := range cfg.Resources {
		files := append(append(slices.Clone(r.Helpers), r.TemplatePaths()...), r.StatusTemplate)
		if r.Chart != "" {
			// A chart directory: every file of it.
			err := filepath.WalkDir(cfg.TemplatePath(r.Chart), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(cfg.Dir, p)
					files = append(files, filepath.ToSlash(rel))
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if f != "" {
				want = append(want, strings.ReplaceAll(f, "/", "-")+"="+f)
			}
		}
	}
	slices.Sort(want)

	var kust struct {
		ConfigMapGenerator []struct {
			Name  string   `json:"name"`
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	readYAML(t, "../../crds/kustomization.yaml", &kust)
	if len(kust.ConfigMapGenerator) != 1 || kust.ConfigMapGenerator[0].Name != "stencil-config" {
		t.Fatalf("crds/kustomization.yaml: want one configMapGenerator named stencil-config, got %+v", kust.ConfigMapGenerator)
	}
	var generated []string
	for _, f := range kust.ConfigMapGenerator[0].Files {
		if !strings.Contains(f, "=") {
			f += "=" + f
		}
		generated = append(generated, f)
	}
	slices.Sort(generated)
	if !slices.Equal(generated, want) {
		t.Errorf("crds/kustomization.yaml files (key=path):\n%s\nwant, from crds/stencil.yaml:\n%s", strings.Join(generated, "\n"), strings.Join(want, "\n"))
	}

	var deploy struct {
		Spec struct {
			Template struct {
				Spec struct {
					Volumes []struct {
						Name      string `json:"name"`
						ConfigMap *struct {
							Name  string `json:"name"`
							Items []struct {
								Key  string `json:"key"`
								Path string `json:"path"`
							} `json:"items"`
						} `json:"configMap"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	readYAML(t, "../../deploy/base/deployment.yaml", &deploy)
	var items []string
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == "stencil-config" {
			for _, it := range v.ConfigMap.Items {
				items = append(items, it.Key+"="+it.Path)
			}
		}
	}
	slices.Sort(items)
	if !slices.Equal(items, want) {
		t.Errorf("deploy/base/deployment.yaml stencil-config volume items (key=path):\n%s\nwant:\n%s", strings.Join(items, "\n"), strings.Join(want, "\n"))
	}

	role, err := controller.ClusterRole("stencil", cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantRole, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../deploy/base/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantRole) {
		t.Errorf("deploy/base/clusterrole.yaml is not what `stencil rbac --config crds/stencil.yaml` prints")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
