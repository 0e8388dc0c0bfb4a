package main

// "stencil test" runs the stencil-test binary (cmd/stencil-test), found
// next to this one or on PATH, with the same arguments, as git runs its
// subcommands: its CEL and schema packages would cost every stencil
// process, render workers included, 11 MiB at start.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// testBinary is the name of the binary "stencil test" runs.
const testBinary = "stencil-test"

func testCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	bin, err := findTestBinary()
	if err != nil {
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "stencil test: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// findTestBinary finds stencil-test next to this executable, else on PATH.
func findTestBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), testBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath(testBinary)
	if err != nil {
		return "", fmt.Errorf("%s is neither next to stencil nor on PATH (make build builds both; go install ./cmd/stencil-test)", testBinary)
	}
	return p, nil
}
