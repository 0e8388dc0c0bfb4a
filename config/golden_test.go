package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/errors/*.golden from what ParseConfig returns")

// TestErrorCorpus pins the full text of every error a config can produce:
// testdata/errors/NAME.yaml is parsed as if it were testdata/stencil.yaml,
// and the error's text must be NAME.golden, byte for byte.
func TestErrorCorpus(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "errors", "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no error cases (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseConfig(cfgPath, data)
			if err == nil {
				t.Fatalf("no error, config %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("config %+v returned with an error", cfg)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.File != cfgPath {
				t.Errorf("errors.As(*FieldError) = %v for %v", fe, err)
			}
			checkGolden(t, strings.TrimSuffix(in, ".yaml")+".golden", err.Error()+"\n")
		})
	}
}

// checkGolden compares got with the file at path, or with -update writes it.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("error text differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
