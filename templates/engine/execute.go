package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/view"
)

// DefaultOutputBytes caps what one template may write for one custom
// resource when no budget says otherwise: renderBudget.stringBytes's
// default. The bound is the entry's stringBytes, the same that bounds one
// function's text and one rendered object, so that an entry that raises it
// for a large object can render one: far above any real object (etcd
// stores at most ~1.5 MiB), it stops a template that loops over a large
// spec from exhausting memory.
const DefaultOutputBytes = 4 << 20

// outputBound is the bound of one template's output under limits.
func outputBound(limits budget.Limits) int {
	if limits.StringBytes > 0 {
		return int(limits.StringBytes)
	}
	return DefaultOutputBytes
}

// RenderError is a failure caused by a template or by the spec it was given.
// Retrying cannot fix it, so the controller reports it in status instead of
// backing off. Render and RenderStatus wrap every such failure in one; find
// it with errors.As.
type RenderError struct {
	// Template is the template path as written in the config; empty when
	// the failure is not in one template (a parent without a namespace).
	Template string
	// Line is the line in the template, 0 when unknown.
	Line int
	// Err is the problem.
	Err error
}

// Error renders as "webapp/deployment.yaml.tmpl:12: map has no entry for key "image"".
func (e *RenderError) Error() string {
	switch {
	case e.Template == "":
		return e.Err.Error()
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %v", e.Template, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Template, e.Err)
}

// Unwrap returns the underlying problem.
func (e *RenderError) Unwrap() error { return e.Err }

// DecodeYAML decodes one YAML document into map/list/scalar values whose
// numbers are int64 or float64, as unstructured objects require.
func DecodeYAML(body []byte) (any, error) {
	js, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return nil, notYAML(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, notYAML(err)
	}
	return view.CopyJSONValue(v)
}

// notYAML wraps a YAML error on one line: the message ends up in a status
// condition, and go-yaml spreads its messages over several lines.
func notYAML(err error) error {
	return &execMessage{msg: "not valid YAML: " + strings.Join(strings.Fields(err.Error()), " "), err: err}
}

// Execute runs the template name of t's namespace into a buffer bounded by
// limits' stringBytes and turns every failure, including a panic, into a
// *RenderError naming the template and line.
func Execute(t *template.Template, name string, data any, limits budget.Limits) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &RenderError{Template: name, Err: fmt.Errorf("template panicked: %v", r)}
		}
	}()
	w := &limitedBuffer{max: outputBound(limits)}
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		return nil, execError(name, err, w.max)
	}
	return w.buf.Bytes(), nil
}

// errOutputTooLarge is what an output past its bound wraps.
var errOutputTooLarge = errors.New("the bound of one template's output")

// outputTooLarge is the error of an output past max bytes.
func outputTooLarge(max int) error {
	return fmt.Errorf("output exceeds %d bytes, %w (renderBudget.stringBytes)", max, errOutputTooLarge)
}

type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

// Write implements io.Writer, failing once the cap would be exceeded.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		return 0, outputTooLarge(b.max)
	}
	return b.buf.Write(p)
}

// execLocation matches text/template's execution error text:
// template: NAME:LINE:COL: executing "NAME" at <CONTEXT>: MESSAGE
var execLocation = regexp.MustCompile(`(?s)^template: (.*?):(\d+):\d+: executing "(?:[^"\\]|\\.)*" at <.*?>: (.*)$`)

// innerLocation is execLocation anywhere in a message: nested includes
// repeat it once per level.
var innerLocation = regexp.MustCompile(`template: ([^\s:]+):(\d+):\d+: executing "(?:[^"\\]|\\.)*" at <.*?>: (?:error calling [^:]+: )?`)

// internalNames rewords the functions the rewrite added, in an error
// message, as what the template author wrote.
var internalNames = strings.NewReplacer(
	"error calling "+valueFunc+": ", "", "error calling "+budget.StepFunc+": ", "",
	includeStruct, "include", toYAMLStruct, "toYaml", toJSONStruct, "toJson",
)

// execMessage is a reworded error message that still unwraps to the
// original error, e.g. the short message of a template.ExecError.
type execMessage struct {
	msg string
	err error
}

// Error returns the reworded message.
func (e *execMessage) Error() string { return e.msg }

// Unwrap returns the original error.
func (e *execMessage) Unwrap() error { return e.err }

func execError(name string, err error, max int) error {
	if errors.Is(err, errOutputTooLarge) {
		return &RenderError{Template: name, Err: outputTooLarge(max)}
	}
	msg := err.Error()
	if locs := innerLocation.FindAllStringSubmatchIndex(msg, -1); len(locs) > 1 {
		// An error inside an include (or a template, which is one here):
		// the innermost action is where it happened; the message says the
		// rest once, not once per level.
		last := locs[len(locs)-1]
		line, convErr := strconv.Atoi(msg[last[4]:last[5]])
		if convErr == nil {
			return &RenderError{Template: msg[last[2]:last[3]], Line: line, Err: &execMessage{msg: internalNames.Replace(msg[last[1]:]), err: err}}
		}
	}
	if m := execLocation.FindStringSubmatch(msg); m != nil {
		line, convErr := strconv.Atoi(m[2])
		if convErr == nil {
			// The action's own file: it may be a helper's define.
			return &RenderError{Template: m[1], Line: line, Err: &execMessage{msg: internalNames.Replace(m[3]), err: err}}
		}
	}
	msg = strings.TrimPrefix(msg, "template: ")
	msg = strings.TrimPrefix(msg, name+": ")
	return &RenderError{Template: name, Err: &execMessage{msg: msg, err: err}}
}

func Describe(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
