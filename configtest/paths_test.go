package configtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveStaysInside: a path a test file names resolves inside the
// test file's directory tree or the config's, symlinks followed, for a
// file there and for one --update would create; anything else is
// refused, naming where it leads.
func TestResolveStaysInside(t *testing.T) {
	top := t.TempDir()
	cfg := filepath.Join(top, "team", "platform")
	tests := filepath.Join(cfg, "tests")
	outside := filepath.Join(top, "elsewhere")
	for _, d := range []string{filepath.Join(tests, "objects"), filepath.Join(cfg, "samples"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(tests, "objects", "r.yaml"), filepath.Join(cfg, "samples", "s.yaml"), filepath.Join(outside, "secret.yaml")} {
		if err := os.WriteFile(f, []byte("x: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(tests, "out.yaml"):     filepath.Join(outside, "secret.yaml"), // a file out
		filepath.Join(tests, "outdir"):       outside,                               // a directory out
		filepath.Join(tests, "dangling"):     filepath.Join(outside, "new.yaml"),    // --update would create its target
		filepath.Join(tests, "in.yaml"):      filepath.Join(cfg, "samples", "s.yaml"),
		filepath.Join(tests, "samples-link"): filepath.Join(cfg, "samples"),
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	rts, err := newRoots(filepath.Join(tests, "a.yaml"), filepath.Join(cfg, "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		want       string // the resolved path, relative to cfg; "" when refused
		refused    string
	}{
		{"a file next to the test", "objects/r.yaml", "tests/objects/r.yaml", ""},
		{"a golden not yet written", "golden/new/app.yaml", "tests/golden/new/app.yaml", ""},
		{"the config's directory", "../samples/s.yaml", "samples/s.yaml", ""},
		{"absolute, inside", filepath.Join(cfg, "samples", "s.yaml"), "samples/s.yaml", ""},
		{"a symlink that stays inside", "in.yaml", "samples/s.yaml", ""},
		{"a new file under a symlink that stays inside", "samples-link/new.yaml", "samples/new.yaml", ""},
		{"up out of the config's directory", "../../escaped-golden.yaml", "", "outside the test file's directory"},
		{"absolute, outside", filepath.Join(outside, "secret.yaml"), "", "outside the test file's directory"},
		{"a symlink out", "out.yaml", "", "elsewhere/secret.yaml, outside"},
		{"a new file under a symlinked directory out", "outdir/golden.yaml", "", "elsewhere/golden.yaml, outside"},
		{"a dangling symlink", "dangling", "", "which does not exist"},
		{"dot-dot through a symlink, taken as written", "outdir/../objects/r.yaml", "tests/objects/r.yaml", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rts.resolve(tests, c.path)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("resolve(%q) = %q, %v; want refused with %q", c.path, got, err, c.refused)
				}
				return
			}
			want := filepath.Join(rts.config, c.want)
			if err != nil || got != want {
				t.Fatalf("resolve(%q) = %q, %v; want %q", c.path, got, err, want)
			}
		})
	}
}

// TestLoadRefusesAGoldenOutside: Load refuses the file, naming it and the
// field, before anything runs (so --update writes nothing).
func TestLoadRefusesAGoldenOutside(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "platform")
	tests := filepath.Join(cfg, "tests")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tests, "a.yaml")
	text := "cases:\n  - {name: ok, resource: {apiVersion: v1, kind: X, metadata: {name: x}}, golden: golden/x.yaml}\n" +
		"  - {name: escapes, resource: {apiVersion: v1, kind: X, metadata: {name: x}}, golden: ../../escaped-golden.yaml}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, filepath.Join(cfg, "stencil.yaml"))
	if err == nil || !strings.Contains(err.Error(), path+": cases[1] (escapes).golden: ../../escaped-golden.yaml resolves to ") {
		t.Fatalf("Load: %v", err)
	}
}
