package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
)

// TestMain serves as a render worker when this test binary is started
// as one (the wall starts os.Executable()).
func TestMain(m *testing.M) {
	if renderworker.IsWorker() {
		os.Exit(renderworker.Serve(reload.WorkerLoad))
	}
	os.Exit(m.Run())
}

var exampleConfig = filepath.Join("..", "..", "crds", "stencil.yaml")

type result struct {
	code           int
	stdout, stderr string
}

// stencil runs "stencil test ARGS" in-process, as main would; args[0] is
// "test".
func stencil(t *testing.T, _ string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := testCommand(context.Background(), args[1:], &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func (r result) expect(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if stderr == nil && r.stderr != "" {
		t.Errorf("unexpected stderr:\n%s", r.stderr)
	}
}
