package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/gvr"
)

// MaxOutputBytes caps what one template may write for one custom resource.
// It is far above any real object (etcd stores at most ~1.5 MiB) and stops a
// template that loops over a large spec from exhausting memory.
const MaxOutputBytes = 4 << 20

// ReservedStatusFields are the status fields the controller owns; a status
// template that renders one of them fails instead of fighting the controller.
var ReservedStatusFields = []string{"observedGeneration", "phase", "replicas", "readyReplicas", "conditions", StatusTemplateRevision}

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

// Render executes every template with parent as data and returns the
// children, in template order and then document order, each in the parent's
// namespace, carrying a controller ownerReference to parent and the stencil
// labels. Template output is split on "---" lines; documents that hold only
// whitespace and comments are skipped. All render failures are returned,
// joined, each a *RenderError.
func (s *Set) Render(parent *gvr.Object) (children []*unstructured.Unstructured, err error) {
	err = s.withExecutor(parent, func(e *executor) error {
		children, err = s.render(e, parent)
		return err
	})
	return children, err
}

// withExecutor checks parent and runs f with an executor of the pool: one
// render, under one budget.
func (s *Set) withExecutor(parent *gvr.Object, f func(e *executor) error) error {
	if err := checkParent(parent); err != nil {
		return err
	}
	e, err := s.executor()
	if err != nil {
		return err
	}
	defer s.release(e)
	return f(e)
}

// RenderAll is Render and RenderStatus under one budget: the render of one
// custom resource, children and status together (budget.go).
func (s *Set) RenderAll(parent *gvr.Object) (children []*unstructured.Unstructured, status map[string]any, err error) {
	err = s.withExecutor(parent, func(e *executor) error {
		if children, err = s.render(e, parent); err != nil {
			return err
		}
		status, err = s.renderStatus(e, parent)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return children, status, nil
}

// render is Render with the executor e.
func (s *Set) render(e *executor, parent *gvr.Object) ([]*unstructured.Unstructured, error) {
	type childKey struct {
		gk   schema.GroupKind
		name string
	}
	var (
		children []*unstructured.Unstructured
		errs     []error
		seen     = map[childKey]string{}
	)
	for _, name := range s.res.Templates {
		out, err := execute(e.t, name, parent)
		if errors.Is(err, ErrBudgetExceeded) {
			// The budget is the whole render's: the next templates would
			// only fail the same way.
			errs = append(errs, err)
			break
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs, err := splitDocuments(out)
		if err != nil {
			errs = append(errs, &RenderError{Template: name, Err: err})
			continue
		}
		for _, doc := range docs {
			fail := func(err error) {
				var re *RenderError
				if errors.As(err, &re) {
					// A value that cannot stand where it is printed: the
					// error names the action's own template and line.
					errs = append(errs, err)
					return
				}
				errs = append(errs, &RenderError{Template: name, Err: fmt.Errorf("%s: %w", doc, err)})
			}
			v, err := decodeDocument(doc.body, &e.st)
			if err != nil {
				fail(err)
				continue
			}
			u, err := s.child(v, parent)
			if err != nil {
				fail(err)
				continue
			}
			key := childKey{gk: u.GroupVersionKind().GroupKind(), name: u.GetName()}
			if prev, dup := seen[key]; dup {
				fail(fmt.Errorf("%s %q is also rendered by %s: names must be unique per kind", u.GetKind(), u.GetName(), prev))
				continue
			}
			seen[key] = fmt.Sprintf("%s %s", name, doc)
			children = append(children, u)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return children, nil
}

// RenderStatus executes the status template and returns the mapping it
// renders, to be merged under .status; nil, nil when there is no status
// template. Failures are *RenderError.
func (s *Set) RenderStatus(parent *gvr.Object) (map[string]any, error) {
	if s.res.StatusTemplate == "" {
		return nil, nil
	}
	var status map[string]any
	err := s.withExecutor(parent, func(e *executor) (err error) {
		status, err = s.renderStatus(e, parent)
		return err
	})
	return status, err
}

// renderStatus is RenderStatus with the executor e.
func (s *Set) renderStatus(e *executor, parent *gvr.Object) (map[string]any, error) {
	if s.res.StatusTemplate == "" {
		return nil, nil
	}
	name := s.res.StatusTemplate
	out, err := execute(e.t, name, parent)
	if err != nil {
		return nil, err
	}
	docs, err := splitDocuments(out)
	if err != nil {
		return nil, &RenderError{Template: name, Err: err}
	}
	switch len(docs) {
	case 0:
		return map[string]any{}, nil
	case 1:
	default:
		return nil, &RenderError{Template: name, Err: fmt.Errorf("renders %d documents, want one mapping", len(docs))}
	}
	v, err := decodeDocument(docs[0].body, &e.st)
	if err != nil {
		var re *RenderError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, &RenderError{Template: name, Err: err}
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &RenderError{Template: name, Err: fmt.Errorf("renders %s, want a mapping of status fields", describe(v))}
	}
	for _, k := range ReservedStatusFields {
		if _, ok := m[k]; ok {
			return nil, &RenderError{Template: name, Err: fmt.Errorf("sets status.%s, which the controller owns", k)}
		}
	}
	return m, nil
}

func checkParent(parent *gvr.Object) error {
	if parent == nil {
		return errors.New("rendering: no parent object")
	}
	if parent.Namespace == "" {
		// Terminal: no retry gives a cluster-scoped resource a namespace.
		return &RenderError{Err: fmt.Errorf("rendering %s %q: children need a namespace, and the resource has none (stencil manages namespaced resources only)", parent.Resource.Kind, parent.Name)}
	}
	return nil
}

// child takes one decoded document, enforces the child contract and stamps
// the ownerReference and labels.
func (s *Set) child(v any, parent *gvr.Object) (*unstructured.Unstructured, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("renders %s, want a Kubernetes object", describe(v))
	}
	u := &unstructured.Unstructured{Object: obj}
	apiVersion, err := RequiredString(obj, "apiVersion")
	if err != nil {
		return nil, err
	}
	kind, err := RequiredString(obj, "kind")
	if err != nil {
		return nil, err
	}
	if md, ok := obj["metadata"]; ok {
		if _, isMap := md.(map[string]any); !isMap {
			return nil, fmt.Errorf("metadata is %s, want a mapping", describe(md))
		}
	}
	name, err := RequiredString(obj, "metadata", "name")
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	if !slices.Contains(s.kinds, gvk) {
		return nil, fmt.Errorf("kind %s is not allowed (allowed: %s)", gvkString(gvk), kindList(s.kinds))
	}
	nameErrs := validation.IsDNS1123Subdomain(name)
	if gvk.GroupKind() == (schema.GroupKind{Kind: "Service"}) {
		nameErrs = validation.IsDNS1035Label(name)
	}
	if len(nameErrs) > 0 {
		return nil, fmt.Errorf("%s name %q is invalid: %s", kind, name, strings.Join(nameErrs, "; "))
	}

	ns, _, err := unstructured.NestedString(obj, "metadata", "namespace")
	if err != nil {
		return nil, fmt.Errorf("metadata.namespace: %w", err)
	}
	switch ns {
	case "":
		u.SetNamespace(parent.Namespace)
	case parent.Namespace:
	default:
		return nil, fmt.Errorf("%s %q names namespace %q: children must live in the resource's namespace %q", kind, name, ns, parent.Namespace)
	}

	lbls, _, err := unstructured.NestedStringMap(obj, "metadata", "labels")
	if err != nil {
		return nil, fmt.Errorf("metadata.labels: %w", err)
	}
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[LabelManagedBy] = ManagedByValue
	lbls[LabelOwnerUID] = parent.UID
	for _, k := range slices.Sorted(maps.Keys(lbls)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("label key %q is invalid: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(lbls[k]); len(msgs) > 0 {
			return nil, fmt.Errorf("label %s=%q is invalid: %s", k, lbls[k], strings.Join(msgs, "; "))
		}
	}
	u.SetLabels(lbls)
	u.SetOwnerReferences([]metav1.OwnerReference{OwnerReference(parent)})
	return u, nil
}

// OwnerReference returns the controller ownerReference every child of parent carries.
func OwnerReference(parent *gvr.Object) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         parent.Resource.APIVersion(),
		Kind:               parent.Resource.Kind,
		Name:               parent.Name,
		UID:                types.UID(parent.UID),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// RequiredString returns the string at fields of obj, an error naming the
// path when it is absent, empty or not a string.
func RequiredString(obj map[string]any, fields ...string) (string, error) {
	path := strings.Join(fields, ".")
	s, found, err := unstructured.NestedString(obj, fields...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !found || s == "" {
		return "", fmt.Errorf("%s is required", path)
	}
	return s, nil
}

// decodeYAML decodes one YAML document into map/list/scalar values whose
// numbers are int64 or float64, as unstructured objects require.
func decodeYAML(body []byte) (any, error) {
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
	return gvr.CopyJSONValue(v)
}

// notYAML wraps a YAML error on one line: the message ends up in a status
// condition, and go-yaml spreads its messages over several lines.
func notYAML(err error) error {
	return &execMessage{msg: "not valid YAML: " + strings.Join(strings.Fields(err.Error()), " "), err: err}
}

// document is one "---"-separated part of a template's output.
type document struct {
	index int // 1-based among the non-empty documents
	line  int // 1-based output line the document starts on
	body  []byte
}

// String names the document for error messages.
func (d document) String() string {
	return fmt.Sprintf("rendered document %d (output line %d)", d.index, d.line)
}

// splitDocuments splits template output on "---" lines (a comment may
// follow) and on "..." document-end lines, and drops documents holding only
// whitespace and comments. Content after "---" on the same line is an error,
// as in kubectl: the YAML decoder would otherwise silently drop the rest.
func splitDocuments(out []byte) ([]document, error) {
	var (
		docs    []document
		cur     []byte
		start   = 1
		hasData bool
	)
	flush := func() {
		if hasData {
			docs = append(docs, document{index: len(docs) + 1, line: start, body: cur})
		}
		cur, hasData = nil, false
	}
	for i, line := range strings.SplitAfter(string(out), "\n") {
		trimmed := strings.TrimRight(line, " \t\r\n")
		if rest, ok := strings.CutPrefix(trimmed, "---"); ok {
			if rest = strings.TrimSpace(rest); rest != "" && !strings.HasPrefix(rest, "#") {
				return nil, fmt.Errorf("output line %d: %q: only a comment may follow the --- document separator", i+1, trimmed)
			}
			flush()
			continue
		}
		if trimmed == "..." {
			flush()
			continue
		}
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			if !hasData {
				start = i + 1
			}
			hasData = true
		}
		cur = append(cur, line...)
	}
	flush()
	return docs, nil
}

// execute runs the template name of t's namespace into a bounded buffer
// and turns every failure, including a panic, into a *RenderError naming
// the template and line.
func execute(t *template.Template, name string, data any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &RenderError{Template: name, Err: fmt.Errorf("template panicked: %v", r)}
		}
	}()
	w := &limitedBuffer{max: MaxOutputBytes}
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		return nil, execError(name, err)
	}
	return w.buf.Bytes(), nil
}

var errOutputTooLarge = fmt.Errorf("output exceeds %d bytes", MaxOutputBytes)

type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

// Write implements io.Writer, failing once the cap would be exceeded.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		return 0, errOutputTooLarge
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
	"error calling "+valueFunc+": ", "", "error calling "+stepFunc+": ", "",
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

func execError(name string, err error) error {
	if errors.Is(err, errOutputTooLarge) {
		return &RenderError{Template: name, Err: errOutputTooLarge}
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

func gvkString(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String() + " " + gvk.Kind
}

func kindList(kinds []schema.GroupVersionKind) string {
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = gvkString(k)
	}
	return strings.Join(parts, ", ")
}

func describe(v any) string {
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
