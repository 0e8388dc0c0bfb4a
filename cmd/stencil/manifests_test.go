package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"stencil.dev/stencil/config"
)

// manifestsOf runs stencil manifests with args and decodes its output.
func manifestsOf(t *testing.T, args ...string) (string, []*unstructured.Unstructured) {
	t.Helper()
	r := stencil(t, "", append([]string{"manifests"}, args...)...)
	if r.code != 0 {
		t.Fatalf("stencil manifests %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	objs, err := decodeResources([]byte(r.stdout))
	if err != nil {
		t.Fatalf("the output does not parse: %v", err)
	}
	return r.stdout, objs
}

// mountedTree writes the files the ConfigMaps hold to a new directory, at
// the paths the Deployment's projected volume gives their keys, and returns
// the paths. A path mounted twice fails the test.
func mountedTree(t *testing.T, objs []*unstructured.Unstructured) (string, []string) {
	t.Helper()
	contents := map[string]map[string][]byte{} // ConfigMap -> key -> file
	var dep *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			files := map[string][]byte{}
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for k, v := range data {
				files[k] = []byte(v)
			}
			bin, _, _ := unstructured.NestedStringMap(o.Object, "binaryData")
			for k, v := range bin {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Fatal(err)
				}
				files[k] = b
			}
			contents[o.GetName()] = files
		case "Deployment":
			dep = o
		}
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	dir := t.TempDir()
	var paths []string
	for _, v := range vols {
		sources, _, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources")
		for _, s := range sources {
			cm := s.(map[string]any)["configMap"].(map[string]any)
			files := contents[cm["name"].(string)]
			for _, it := range cm["items"].([]any) {
				key, p := it.(map[string]any)["key"].(string), it.(map[string]any)["path"].(string)
				data, ok := files[key]
				if !ok {
					t.Fatalf("volume item %s: ConfigMap %s has no key %s", p, cm["name"], key)
				}
				if slices.Contains(paths, p) {
					t.Fatalf("%s is mounted twice", p)
				}
				paths = append(paths, p)
				full := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	slices.Sort(paths)
	return dir, paths
}

// namedFiles are the files cfg names, relative to its directory, and
// stencil.yaml (the config itself, as it is mounted).
func namedFiles(t *testing.T, cfgPath string) []string {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{"stencil.yaml": true}
	for _, r := range cfg.Resources {
		for _, f := range append(append(slices.Clone(r.Helpers), r.TemplatePaths()...), r.StatusTemplate) {
			if f != "" {
				set[filepath.ToSlash(filepath.Clean(f))] = true
			}
		}
		if r.Chart != "" {
			err := filepath.WalkDir(cfg.TemplatePath(r.Chart), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(cfg.Dir, p)
					set[filepath.ToSlash(rel)] = true
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var out []string
	for f := range set {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// checkRoundTrip: every file cfgPath names is mounted exactly once, and
// stencil validate says of the mounted tree what it says of the original.
func checkRoundTrip(t *testing.T, cfgPath string, objs []*unstructured.Unstructured) []string {
	t.Helper()
	dir, paths := mountedTree(t, objs)
	if want := namedFiles(t, cfgPath); !slices.Equal(paths, want) {
		t.Errorf("mounted files:\n%s\nwant the files the config names:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	mounted := filepath.Join(dir, "stencil.yaml")
	orig := stencil(t, "", "validate", "--config", cfgPath)
	got := stencil(t, "", "validate", "--config", mounted)
	if orig.code != 0 || got.code != orig.code ||
		strings.TrimPrefix(got.stdout, mounted) != strings.TrimPrefix(orig.stdout, cfgPath) {
		t.Errorf("validate of the mounted tree: exit %d\n%s%s\nwant, as of %s: exit %d\n%s%s",
			got.code, got.stdout, got.stderr, cfgPath, orig.code, orig.stdout, orig.stderr)
	}
	return paths
}

func TestManifestsExampleConfig(t *testing.T) {
	out, objs := manifestsOf(t, "--config", exampleConfig)
	checkRoundTrip(t, exampleConfig, objs)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	// The WebApp and Hello entries declare their API: their CRDs come along.
	want := []string{"Namespace", "ServiceAccount", "ConfigMap", "CustomResourceDefinition", "CustomResourceDefinition",
		"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment", "PodDisruptionBudget"}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	for _, s := range []string{"--leader-elect\n", "--config=/etc/stencil/stencil.yaml", "replicas: 2", "minAvailable: 1",
		"image: ghcr.io/stencil-dev/stencil:latest", "namespace: stencil-system"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q", s)
		}
	}
	if again, _ := manifestsOf(t, "--config", exampleConfig); again != out {
		t.Error("two runs differ")
	}
}

func TestManifestsOptions(t *testing.T) {
	out, objs := manifestsOf(t, "--config", exampleConfig, "--ring", "3", "--monitoring", "--namespace", "ops", "--image", "example.com/stencil:v1")
	for _, s := range []string{"--ring=stencil", "replicas: 3", "maxUnavailable: 1", "kind: ServiceMonitor",
		"kind: PrometheusRule", "image: example.com/stencil:v1", "name: ops"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q", s)
		}
	}
	if strings.Contains(out, "--leader-elect\n") {
		t.Error("--ring and --leader-elect both in the args")
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && ns != "ops" {
			t.Errorf("%s %s in namespace %s, want ops", o.GetKind(), o.GetName(), ns)
		}
	}
	stencil(t, "", "manifests", "--config", exampleConfig, "--namespace", "Not_A_Name").expect(t, 2, nil, []string{"--namespace"})
	stencil(t, "", "manifests", "--config", "nope.yaml").expect(t, 2, nil, []string{"nope.yaml"})
}

// A chart with a subchart (bitnami nginx and its common library) is
// mounted whole and validates as the original does.
func TestManifestsChartWithSubcharts(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "templates", "chart", "testdata", "charts", "nginx"), filepath.Join(dir, "charts", "nginx"))
	cfgPath := filepath.Join(dir, "stencil.yaml")
	write(t, cfgPath, "resources:\n  - {group: charts.example.com, version: v1, resource: nginxes, chart: charts/nginx}\n")
	_, objs := manifestsOf(t, "--config", cfgPath)
	paths := checkRoundTrip(t, cfgPath, objs)
	if !slices.Contains(paths, "charts/nginx/charts/common/Chart.yaml") {
		t.Errorf("the subchart is not mounted: %v", paths)
	}
}

// A .tgz chart is binaryData, and mounts as the same archive.
func TestManifestsChartArchive(t *testing.T) {
	dir := t.TempDir()
	writeChartArchive(t, filepath.Join("..", "..", "crds", "charts", "hello"), filepath.Join(dir, "hello.tgz"))
	cfgPath := filepath.Join(dir, "stencil.yaml")
	write(t, cfgPath, "resources:\n  - {group: charts.example.com, version: v1, resource: hellos, chart: hello.tgz}\n")
	out, objs := manifestsOf(t, "--config", cfgPath)
	if !strings.Contains(out, "binaryData:") {
		t.Error("the .tgz is not binaryData")
	}
	checkRoundTrip(t, cfgPath, objs)
}

// writeChartArchive packs the chart directory from as helm package does:
// a gzipped tar whose files are under the chart's name.
func writeChartArchive(t *testing.T, from, to string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		data := read(t, p)
		name := filepath.ToSlash(filepath.Join(filepath.Base(from), rel))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err = tw.Write([]byte(data))
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, buf.String())
}

func TestManifestsTooLarge(t *testing.T) {
	dir := t.TempDir()
	big := "# " + strings.Repeat("x", 300<<10) + "\n"
	write(t, filepath.Join(dir, "big.yaml.tmpl"), big)
	cfgPath := filepath.Join(dir, "stencil.yaml")
	write(t, cfgPath, "resources:\n  - {group: a.example.com, version: v1, resource: things, templates: [big.yaml.tmpl]}\n")
	stencil(t, "", "manifests", "--config", cfgPath).
		expect(t, 1, nil, []string{"big.yaml.tmpl is 300.0 KiB", "FROM stencil's", "docs/operating.md"})

	// Files of 150 KiB each: one per ConfigMap, 17 of them.
	var names []string
	for i := range 17 {
		name := fmt.Sprintf("t%02d.yaml.tmpl", i)
		write(t, filepath.Join(dir, name), "# "+strings.Repeat("x", 150<<10)+"\n")
		names = append(names, name)
	}
	write(t, cfgPath, "resources:\n  - {group: a.example.com, version: v1, resource: things, templates: ["+strings.Join(names, ", ")+"]}\n")
	stencil(t, "", "manifests", "--config", cfgPath).
		expect(t, 1, nil, []string{"18 files are 2550.", "KiB (encoded), more than 16 ConfigMaps", "docs/operating.md"})

	// 16 of them fit, one per ConfigMap.
	write(t, cfgPath, "resources:\n  - {group: a.example.com, version: v1, resource: things, templates: ["+strings.Join(names[:15], ", ")+"]}\n")
	_, objs := manifestsOf(t, "--config", cfgPath)
	checkRoundTrip(t, cfgPath, objs)
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		copyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, to, read(t, from))
}

// An entry with a schema: its generated CRD is printed (before the roles),
// and --manage-crds runs with it and grants the CRD rule.
func TestManifestsGeneratedCRDs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "d.yaml.tmpl"), "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Name }}\n")
	cfgPath := filepath.Join(dir, "stencil.yaml")
	write(t, cfgPath, "resources:\n  - group: a.example.com\n    version: v1\n    resource: gadgets\n    kind: Gadget\n"+
		"    templates: [d.yaml.tmpl]\n    schema:\n      spec:\n        image: string\n")
	out, objs := manifestsOf(t, "--config", cfgPath, "--manage-crds")
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if i := slices.Index(kinds, "CustomResourceDefinition"); i < 0 || i > slices.Index(kinds, "ClusterRole") {
		t.Errorf("kinds %v: want a CustomResourceDefinition before the ClusterRole", kinds)
	}
	for _, s := range []string{"name: gadgets.a.example.com", "- --manage-crds", "customresourcedefinitions"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q", s)
		}
	}
}

// TestRBACAndManifestsGrantTheSame: stencil rbac and stencil manifests
// print the same ClusterRole rules for the same config and flags (one
// source, package install), for the example config and with each flag
// that adds rules.
func TestRBACAndManifestsGrantTheSame(t *testing.T) {
	cfgPath := filepath.Join("..", "..", "crds", "stencil.yaml")
	for _, flags := range [][]string{nil, {"--manage-crds"}, {"--metrics-secure"}, {"--manage-crds", "--metrics-secure"}} {
		r := stencil(t, "", append([]string{"rbac", "--config", cfgPath}, flags...)...)
		if r.code != 0 {
			t.Fatalf("stencil rbac %v: exit %d: %s", flags, r.code, r.stderr)
		}
		printed, err := decodeResources([]byte(r.stdout))
		if err != nil {
			t.Fatal(err)
		}
		_, objs := manifestsOf(t, append([]string{"--config", cfgPath}, flags...)...)
		rules := func(objs []*unstructured.Unstructured) string {
			for _, o := range objs {
				if o.GetKind() == "ClusterRole" {
					rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
					return fmt.Sprint(rs)
				}
			}
			t.Fatalf("%v: no ClusterRole", flags)
			return ""
		}
		if got, want := rules(objs), rules(printed); got != want || want == "[]" {
			t.Errorf("%v: manifests' rules\n%s\nrbac's\n%s", flags, got, want)
		}
	}
}
