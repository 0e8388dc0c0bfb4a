package configtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A test file names files (its resources, observed children, reads and
// golden files) that "stencil test" reads and, with --update, writes. A
// test file is a team's code under review, and CI runs it with write
// access to the checkout: a golden path of ../../x.yaml, or a symlink
// pointing out of the tree, must not let --update write anywhere else.
// So every path a test file names resolves, symlinks followed, inside the
// test file's directory tree or the config's directory tree, or the test
// file is invalid.

// roots are the directories a test file's paths may resolve into, each
// with its symlinks resolved.
type roots struct {
	tests, config string
}

// newRoots returns the roots of the test file at path, for the config
// at configPath.
func newRoots(path, configPath string) (roots, error) {
	tests, err := realDir(filepath.Dir(path))
	if err != nil {
		return roots{}, fmt.Errorf("the test file's directory: %w", err)
	}
	config, err := realDir(filepath.Dir(configPath))
	if err != nil {
		return roots{}, fmt.Errorf("the config's directory: %w", err)
	}
	return roots{tests: tests, config: config}, nil
}

// realDir is dir made absolute, symlinks resolved.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// resolve returns the file name names (relative to base, the test file's
// directory), absolute and with its symlinks resolved, when it is inside
// one of the roots. A file that does not exist yet (a golden file
// --update would create) is resolved through its nearest existing
// ancestor, so a symlinked directory cannot carry the write out. The
// result is the path to read or write: what was checked is what is used.
func (r roots) resolve(base, name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := resolveExisting(p)
	if err != nil {
		return "", err
	}
	if inside(r.tests, real) || inside(r.config, real) {
		return real, nil
	}
	return "", fmt.Errorf("%s resolves to %s, outside the test file's directory %s and the config's directory %s", name, real, r.tests, r.config)
}

// resolveExisting resolves the symlinks of p's nearest existing ancestor
// (p itself when it exists) and appends the rest. A symlink whose target
// does not exist is refused: writing through it would create its target,
// wherever that is.
func resolveExisting(p string) (string, error) {
	rest := ""
	for q := p; ; {
		real, err := filepath.EvalSymlinks(q)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(q); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(q)
			return "", fmt.Errorf("%s is a symlink to %s, which does not exist", q, target)
		}
		parent := filepath.Dir(q)
		if parent == q {
			return "", err
		}
		rest = filepath.Join(filepath.Base(q), rest)
		q = parent
	}
}

// inside says whether p is root or below it; both are absolute and clean.
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}
