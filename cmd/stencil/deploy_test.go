package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
	"stencil.dev/stencil/controller"
	"stencil.dev/stencil/gvr"
	"stencil.dev/stencil/templates"
)

// TestDeployConfigMatchesExamples keeps deploy/config (flat, as a ConfigMap
// mounts it) equal to crds/stencil.yaml and its templates, and the
// ClusterRole in deploy/ sufficient for the deploy config.
func TestDeployConfigMatchesExamples(t *testing.T) {
	deployCfg, err := gvr.Load("../../deploy/config/stencil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exampleCfg, err := gvr.Load("../../crds/stencil.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(deployCfg.Resources) != len(exampleCfg.Resources) {
		t.Fatalf("deploy config has %d resources, crds/stencil.yaml %d", len(deployCfg.Resources), len(exampleCfg.Resources))
	}
	for i, d := range deployCfg.Resources {
		e := exampleCfg.Resources[i]
		if d.GVR() != e.GVR() || len(d.Templates) != len(e.Templates) {
			t.Fatalf("resources[%d]: deploy %s with %d templates, example %s with %d", i, d.GVR(), len(d.Templates), e.GVR(), len(e.Templates))
		}
		pairs := [][2]string{{d.StatusTemplate, e.StatusTemplate}}
		for j := range d.Templates {
			pairs = append(pairs, [2]string{d.Templates[j], e.Templates[j]})
		}
		for _, p := range pairs {
			if p[0] == "" && p[1] == "" {
				continue
			}
			a, err := os.ReadFile(deployCfg.TemplatePath(p[0]))
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(exampleCfg.TemplatePath(p[1]))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("deploy/config/%s differs from crds/%s: copy it over", p[0], filepath.ToSlash(p[1]))
			}
		}
	}
	if _, err := templates.LoadAll(deployCfg, templates.Options{}); err != nil {
		t.Fatal(err)
	}
	role, err := controller.ClusterRole("stencil", deployCfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../deploy/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/clusterrole.yaml is not what `stencil rbac --config deploy/config/stencil.yaml` prints")
	}
}
