package main

import (
	"os"
	"testing"

	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
)

// TestMain serves as a render worker when the test binary is started as
// one: render and diff, called in-process by these tests, start workers
// from os.Executable, which is this binary.
func TestMain(m *testing.M) {
	if renderworker.IsWorker() {
		os.Exit(renderworker.Serve(reload.WorkerLoad))
	}
	os.Exit(m.Run())
}
