package config

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FieldError is one problem found in a config file. Its message names the
// file, the entry and the field, e.g.
// "stencil.yaml: resources[1] (memcacheds.v1alpha1.cache.example.com): templates[0]: ...".
type FieldError struct {
	// File is the config file as given.
	File string
	// Entry names the resources entry, empty for problems outside any entry.
	Entry string
	// Field is the field path inside the entry, e.g. templates[0].
	Field string
	// Err is the problem itself.
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	var b strings.Builder
	for _, s := range []string{e.File, e.Entry, e.Field} {
		if s != "" {
			b.WriteString(s)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *FieldError) Unwrap() error { return e.Err }

// EntryName names resources[i] for error messages, with its GVR when known.
func EntryName(i int, r Resource) string {
	if r.Resource == "" || r.Version == "" {
		return fmt.Sprintf("resources[%d]", i)
	}
	return fmt.Sprintf("resources[%d] (%s)", i, r)
}

// toErrors joins errs into one error, one *FieldError per line, in the
// order given. A path under resources[i] names its entry as label(i) does.
func toErrors(file string, label func(i int) string, errs field.ErrorList) error {
	out := make([]error, len(errs))
	for k, e := range errs {
		out[k] = newFieldError(file, label, e)
	}
	return errors.Join(out...)
}

// newFieldError turns e into a *FieldError whose text is e.Detail alone:
// e.ErrorBody() would add "Invalid value: ..." to every message.
func newFieldError(file string, label func(i int) string, e *field.Error) *FieldError {
	d := &detail{text: e.Detail}
	d.cause, _ = e.BadValue.(error)
	fe := &FieldError{File: file, Field: e.Field, Err: d}
	if e.Field == (*field.Path)(nil).String() {
		fe.Field = ""
	}
	if i, rest, ok := entryIndex(e.Field); ok {
		fe.Entry, fe.Field = label(i), rest
	}
	return fe
}

// detail is what a field.Error says, unwrapping to the error that made
// it, if any (a missing file's fs.ErrNotExist).
type detail struct {
	text  string
	cause error
}

// Error implements error.
func (d *detail) Error() string { return d.text }

// Unwrap returns the cause.
func (d *detail) Unwrap() error { return d.cause }

// entryIndex splits a path resources[i].rest into i and rest.
func entryIndex(path string) (i int, rest string, ok bool) {
	after, ok := strings.CutPrefix(path, "resources[")
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(after, "]")
	i, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, "", false
	}
	return i, strings.TrimPrefix(rest, "."), true
}

// sortByEntry orders errs by the entry they are in, keeping their order
// within an entry; errors outside any entry come first.
func sortByEntry(errs field.ErrorList) {
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		return entryOrder(a.Field) - entryOrder(b.Field)
	})
}

// entryOrder is i for a path under resources[i], else -1.
func entryOrder(path string) int {
	if i, _, ok := entryIndex(path); ok {
		return i
	}
	return -1
}

// fileError says the file (or chart) name at p is missing or unusable.
func fileError(p *field.Path, name string, err error) *field.Error {
	typ := field.ErrorTypeInvalid
	if errors.Is(err, fs.ErrNotExist) {
		typ = field.ErrorTypeNotFound
	}
	return &field.Error{Type: typ, Field: p.String(), BadValue: err, Detail: name + ": " + err.Error()}
}
