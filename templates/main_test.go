package templates

import (
	"os"
	"testing"
)

// TestMain decodes every document of every test both ways (the fast path
// and the text path) and fails a render where they differ.
func TestMain(m *testing.M) {
	verifyFastPath = true
	os.Exit(m.Run())
}
