package snapshot

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestTakeReadsOnceAndVerifies takes a snapshot of a template, a missing
// file and a chart directory, changes the disk after, and reads the
// bytes taken; the snapshot survives JSON, and a changed one fails Verify.
func TestTakeReadsOnceAndVerifies(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("stencil.yaml", "resources: []\n")
	write("t.yaml", "kind: ConfigMap\n")
	write("chart/Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")
	write("chart/templates/cm.yaml", "kind: ConfigMap\n")
	write("chart/.helmignore", "skip.txt\n")
	write("chart/skip.txt", "not packed\n")
	tmpl, missing, chart := filepath.Join(dir, "t.yaml"), filepath.Join(dir, "gone.yaml"), filepath.Join(dir, "chart")

	s := Take(filepath.Join(dir, "stencil.yaml"), false, []byte("resources: []\n"),
		[]Named{{Path: tmpl}, {Path: missing}, {Path: chart, Chart: true}, {Path: tmpl}}, nil)
	if err := os.WriteFile(tmpl, []byte("changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(tmpl); err != nil || string(got) != "kind: ConfigMap\n" {
		t.Errorf("ReadFile(template) = %q, %v; want the bytes taken", got, err)
	}
	if _, err := s.ReadFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if !s.Stat(filepath.Join(dir, "never-named")).Missing {
		t.Error("Stat of a path never named is not Missing")
	}
	if f := s.Stat(chart); !f.Dir || len(f.Data) == 0 {
		t.Errorf("Stat(chart) = %+v, want a packed directory", f)
	}
	if _, err := s.ChartArchive(chart); err != nil {
		t.Errorf("ChartArchive(chart) = %v", err)
	}
	files, err := ChartFiles(chart)
	if err != nil || len(files) != 4 {
		t.Errorf("ChartFiles(chart) = %v, %v; want its 4 files (.helmignore applies to packing only)", files, err)
	}

	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Errorf("Verify after JSON: %v", err)
	}
	back.Files[tmpl].Data = []byte("tampered\n")
	if err := back.Verify(); err == nil {
		t.Error("Verify of a changed snapshot passed")
	}
}
