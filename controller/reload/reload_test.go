package reload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/templates"
)

const stencilYAML = `resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [deployment.yaml.tmpl]
`

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name | quote }}
spec:
  selector: {matchLabels: {app: {{ .Name | quote }}}}
  template:
    metadata: {labels: {app: {{ .Name | quote }}}}
    spec:
      containers: [{name: web, image: {{ .Spec.image | quote }}}]
`

// configMapVolume lays files out as the kubelet does for a ConfigMap
// volume: each name is a symlink through ..data to a timestamped directory,
// and an update swaps ..data.
func configMapVolume(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	gen := filepath.Join(dir, "..gen-"+time.Now().Format("150405.000000000"))
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(gen, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

type attempt struct {
	ok    bool
	image string // what the applied template renders for .Spec.image
}

func TestReloadThroughAConfigMapVolume(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML, "deployment.yaml.tmpl": deployment})
	path := filepath.Join(dir, "stencil.yaml")

	var applied []*templates.Set
	var results []bool
	w := New(Source{Path: path}, time.Hour, func(_ context.Context, cfg *config.Config, sets []*templates.Set) error {
		applied = append(applied, sets...)
		return nil
	}, func(ok bool, _ time.Time) { results = append(results, ok) })
	if _, _, err := Load(path); err != nil {
		t.Fatal(err)
	}

	w.reload(ctx, false)
	if len(applied) != 0 || len(results) != 0 {
		t.Fatalf("unchanged files: %d applies, %d results; want none", len(applied), len(results))
	}

	// A template edit, through the ..data swap.
	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML,
		"deployment.yaml.tmpl": strings.Replace(deployment, "name: web", "name: server", 1)})
	w.reload(ctx, false)
	if len(applied) != 1 || len(results) != 1 || !results[0] {
		t.Fatalf("template edit: %d applies, results %v; want 1 apply, [true]", len(applied), results)
	}

	// A broken template: rejected whole, Apply not called.
	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML, "deployment.yaml.tmpl": "{{ .Name "})
	w.reload(ctx, false)
	if len(applied) != 1 || len(results) != 2 || results[1] {
		t.Fatalf("broken template: %d applies, results %v; want still 1 apply, then false", len(applied), results)
	}
	// Reported once, not on every poll.
	w.reload(ctx, false)
	if len(results) != 2 {
		t.Fatalf("an unchanged broken config was tried again: results %v", results)
	}

	// Fixed: taken again.
	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML, "deployment.yaml.tmpl": deployment})
	w.reload(ctx, false)
	if len(applied) != 2 || len(results) != 3 || !results[2] {
		t.Fatalf("fixed config: %d applies, results %v; want 2 applies, last true", len(applied), results)
	}

	// SIGHUP forces an attempt even when nothing changed.
	w.reload(ctx, true)
	if len(applied) != 3 {
		t.Fatalf("forced reload: %d applies, want 3", len(applied))
	}
}

// deniedError is refused for a reason outside the files, as the
// controller's RBAC refusal.
type deniedError struct{}

func (deniedError) Error() string   { return "reload refused: stencil may not create configmaps (RBAC)" }
func (deniedError) Retryable() bool { return true }

// A config refused for a reason outside its files (RBAC granted later) is
// tried again by the poll, every RetryDenied, without an edit; one refused
// for itself is not.
func TestReloadRetriesARefusalOutsideTheFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML, "deployment.yaml.tmpl": deployment})
	path := filepath.Join(dir, "stencil.yaml")
	denied := true
	var results []bool
	w := New(Source{Path: path}, time.Hour, func(context.Context, *config.Config, []*templates.Set) error {
		if denied {
			return fmt.Errorf("%s: %w", path, deniedError{})
		}
		return nil
	}, func(ok bool, _ time.Time) { results = append(results, ok) })

	configMapVolume(t, dir, map[string]string{"stencil.yaml": stencilYAML,
		"deployment.yaml.tmpl": strings.Replace(deployment, "name: web", "name: server", 1)})
	w.reload(ctx, false)
	if len(results) != 1 || results[0] {
		t.Fatalf("denied: results %v, want [false]", results)
	}
	if wait := time.Until(w.retryAt); wait < RetryDenied-time.Second || wait > RetryDenied {
		t.Fatalf("retry in %s, want %s", wait, RetryDenied)
	}
	w.reload(ctx, false)
	if len(results) != 1 {
		t.Fatalf("tried again before RetryDenied: results %v", results)
	}
	// RetryDenied later, with the RBAC granted meanwhile.
	w.retryAt = time.Now().Add(-time.Millisecond)
	denied = false
	w.reload(ctx, false)
	if len(results) != 2 || !results[1] {
		t.Fatalf("after the grant: results %v, want [false true]", results)
	}
	w.reload(ctx, false)
	if len(results) != 2 {
		t.Fatalf("taken config tried again: results %v", results)
	}
}
