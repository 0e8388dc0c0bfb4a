package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: stencil run collects at GOGC 50 unless the environment
// chose a GOGC, which then stands.
func TestSetGCPercent(t *testing.T) {
	restore := debug.SetGCPercent(100)
	defer debug.SetGCPercent(restore)

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	setGCPercent()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: percent %d, want %d", got, gcPercent)
	}

	t.Setenv("GOGC", "200")
	debug.SetGCPercent(200) // what the runtime read from GOGC at start
	setGCPercent()
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("GOGC=200: percent %d, want 200 (left as the environment set it)", got)
	}
}
