//go:build integration

package integration

import (
	"os"
	"testing"

	stencilreload "stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/renderworker"
)

// TestMain serves as a render worker when this test binary is started as
// one: the in-process controllers render through the wall, whose workers
// are os.Executable.
func TestMain(m *testing.M) {
	if renderworker.IsWorker() {
		os.Exit(renderworker.Serve(stencilreload.WorkerLoad))
	}
	os.Exit(m.Run())
}
