package templates

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/engine"
	"stencil.dev/stencil/templates/view"
)

// Render executes every template with parent as data and returns the
// children, in template order and then document order, each in the parent's
// namespace, carrying a controller ownerReference to parent and the stencil
// labels. Template output is split on "---" lines; documents that hold only
// whitespace and comments are skipped. All render failures are returned,
// joined, each a *engine.RenderError.
func (s *Set) Render(parent *view.Object) (children []*unstructured.Unstructured, err error) {
	if s.chart != nil {
		r, err := s.renderChart(parent)
		if err != nil {
			return nil, err
		}
		return r.Children, nil
	}
	err = s.withExecutor(parent, func(e *executor) error {
		children, _, err = s.render(e, parent)
		return err
	})
	return children, err
}

// withExecutor checks parent and runs f with an executor of the pool: one
// render, under one budget.
// A panic anywhere in the render (templates, decoding, the child
// contract) is a *engine.RenderError, never a dead process: one resource's
// input must not take the controller down for every tenant.
func (s *Set) withExecutor(parent *view.Object, f func(e *executor) error) (err error) {
	if err := checkParent(parent); err != nil {
		return err
	}
	e, err := s.executor()
	if err != nil {
		return err
	}
	e.reads = parent.Reads
	defer func() {
		if r := recover(); r != nil {
			// Dropped, not pooled: it stopped half-way through a render.
			err = &engine.RenderError{Err: fmt.Errorf("render panicked: %v", r)}
			return
		}
		s.release(e)
	}()
	return f(e)
}

// RenderWith renders the children and the status of one custom resource
// under one budget (package budget), reading its live children from live
// (nil: it has none). Templates render in dependency order; one that
// cannot render yet waits (Result.Waits), and the others render. All
// render failures are returned, joined, each a *engine.RenderError.
//
// With a wall (SetWall), the render runs there, in a worker process the
// kernel bounds; without one, in this process under the budget alone.
// Either way it is given only what its templates can read of the
// resource's status (Visible).
func (s *Set) RenderWith(parent *view.Object, live Live) (*Result, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	parent = s.Visible(parent)
	if s.wall != nil {
		return s.wall.Render(s, parent, live)
	}
	return s.RenderHere(parent, live, nil)
}

// RenderHere is RenderWith in this process, whatever the wall: what a
// render worker runs. trace, when not nil, is told the name of each
// template (or the chart) before it runs, so that a worker that dies names
// the template it was rendering.
func (s *Set) RenderHere(parent *view.Object, live Live, trace func(template string)) (*Result, error) {
	if trace == nil {
		trace = func(string) {}
	}
	if s.chart != nil {
		trace(s.res.Chart)
		return s.renderChart(parent)
	}
	var r Result
	err := s.withExecutor(parent, func(e *executor) (err error) {
		e.live, e.trace = live, trace
		if r.Children, r.Waits, err = s.render(e, parent); err != nil {
			return err
		}
		r.Status, err = s.renderStatus(e, parent)
		if _, waits := waitedFor(err); waits {
			r.Status, r.StatusWaits = nil, true
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// render is Render with the executor e.
func (s *Set) render(e *executor, parent *view.Object) ([]*unstructured.Unstructured, []Wait, error) {
	var (
		children []*unstructured.Unstructured
		errs     []error
		seen     = map[childKey]string{}
		rendered = map[string][]*unstructured.Unstructured{}
		waiting  = map[string]Wait{}
		waits    []Wait
		nodes    = resultNodes{bound: s.budget.ResultNodes}
	)
	for _, i := range s.order {
		item := s.res.Templates[i]
		name := item.Path
		if w, ok := e.blocked(item, s.byName, rendered, waiting); ok {
			waiting[item.Name()] = w
			waits = append(waits, w)
			continue
		}
		if e.trace != nil {
			e.trace(name)
		}
		out, err := engine.Execute(e.t, name, parent, s.budget)
		if errors.Is(err, budget.ErrExceeded) {
			// The budget is the whole render's: the next templates would
			// only fail the same way.
			errs = append(errs, err)
			break
		}
		if child, ok := waitedFor(err); ok {
			w := Wait{Template: item.Name(), For: child, Reason: "does not exist"}
			waiting[item.Name()] = w
			waits = append(waits, w)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs, err := splitDocuments(out)
		if err != nil {
			errs = append(errs, &engine.RenderError{Template: name, Err: err})
			continue
		}
		over := false
		for _, u := range s.documents(e, parent, name, docs, seen, &errs) {
			if err := nodes.add(name, u); err != nil {
				errs, over = append(errs, err), true
				break
			}
			children = append(children, u)
			rendered[item.Name()] = append(rendered[item.Name()], u)
			for _, c := range item.ReadyWhen {
				if c.Kind == u.GetKind() {
					ref := u.GetKind() + "/" + u.GetName()
					e.checks[ref] = append(e.checks[ref], c)
				}
			}
		}
		if over {
			// The bound is the whole render's, as the budget is.
			break
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return children, waits, nil
}

// childKey names a child within one render.
type childKey struct {
	gk   schema.GroupKind
	name string
}

// documents turns the documents one template (name) rendered into
// children: decoded, held to the child contract, and unique by kind and
// name within the render (seen). Each failure is added to errs.
func (s *Set) documents(e *executor, parent *view.Object, name string, docs []document, seen map[childKey]string, errs *[]error) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range docs {
		fail := func(err error) {
			var re *engine.RenderError
			if errors.As(err, &re) {
				// A value that cannot stand where it is printed: the
				// error names the action's own template and line.
				*errs = append(*errs, err)
				return
			}
			*errs = append(*errs, &engine.RenderError{Template: name, Err: fmt.Errorf("%s: %w", doc, err)})
		}
		v, err := engine.Decode(doc.body, &e.st)
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
		out = append(out, u)
	}
	return out
}

// RenderStatus executes the status template and returns the mapping it
// renders, to be merged under .status; nil, nil when there is no status
// template. Failures are *engine.RenderError.
func (s *Set) RenderStatus(parent *view.Object) (map[string]any, error) {
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
func (s *Set) renderStatus(e *executor, parent *view.Object) (map[string]any, error) {
	if s.res.StatusTemplate == "" {
		return nil, nil
	}
	name := s.res.StatusTemplate
	if e.trace != nil {
		e.trace(name)
	}
	out, err := engine.Execute(e.t, name, parent, s.budget)
	if err != nil {
		return nil, err
	}
	docs, err := splitDocuments(out)
	if err != nil {
		return nil, &engine.RenderError{Template: name, Err: err}
	}
	switch len(docs) {
	case 0:
		return map[string]any{}, nil
	case 1:
	default:
		return nil, &engine.RenderError{Template: name, Err: fmt.Errorf("renders %d documents, want one mapping", len(docs))}
	}
	v, err := engine.Decode(docs[0].body, &e.st)
	if err != nil {
		var re *engine.RenderError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, &engine.RenderError{Template: name, Err: err}
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &engine.RenderError{Template: name, Err: fmt.Errorf("renders %s, want a mapping of status fields", engine.Describe(v))}
	}
	for _, k := range contract.ReservedStatusFields {
		if _, ok := m[k]; ok {
			return nil, &engine.RenderError{Template: name, Err: fmt.Errorf("sets status.%s, which the controller owns", k)}
		}
	}
	return m, nil
}

func checkParent(parent *view.Object) error {
	if parent == nil {
		return errors.New("rendering: no parent object")
	}
	if parent.Namespace == "" {
		// Terminal: no retry gives a cluster-scoped resource a namespace.
		return &engine.RenderError{Err: fmt.Errorf("rendering %s %q: children need a namespace, and the resource has none (stencil manages namespaced resources only)", parent.Resource.Kind, parent.Name)}
	}
	return nil
}

// tokenSecretType is the Secret type for which the API server's token
// controller writes a token of the ServiceAccount the Secret names.
const tokenSecretType = "kubernetes.io/service-account-token"

// grantsByType refuses a child whose kind is allowed but whose type grants
// permissions, unless the entry sets allowPermissionGrants, as Role and
// RoleBinding need it: a Secret of type kubernetes.io/service-account-token
// gets a token of any ServiceAccount of the namespace it names, which a
// tenant who may create the custom resource may not otherwise get.
func (s *Set) grantsByType(gvk schema.GroupVersionKind, obj map[string]any) error {
	if gvk.GroupKind() != (schema.GroupKind{Kind: "Secret"}) || s.res.AllowPermissionGrants {
		return nil
	}
	if t, _ := obj["type"].(string); t == tokenSecretType {
		return fmt.Errorf("Secret of type %s grants permissions: it is given a token of the ServiceAccount it names; set allowPermissionGrants: true on the entry to allow it", tokenSecretType)
	}
	return nil
}

// child takes one decoded document, enforces the child contract and stamps
// the ownerReference and labels.
func (s *Set) child(v any, parent *view.Object) (*unstructured.Unstructured, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("renders %s, want a Kubernetes object", engine.Describe(v))
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
			return nil, fmt.Errorf("metadata is %s, want a mapping", engine.Describe(md))
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
	if s.chart != nil {
		if err := s.chartKind(gvk, name); err != nil {
			return nil, err
		}
	} else if !slices.Contains(s.kinds, gvk) {
		return nil, fmt.Errorf("kind %s is not allowed (allowed: %s)", gvkString(gvk), kindList(s.kinds))
	}
	if err := s.grantsByType(gvk, obj); err != nil {
		return nil, err
	}
	if err := checkKeys(obj, ""); err != nil {
		return nil, err
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
	lbls[contract.LabelManagedBy] = contract.ManagedByValue
	lbls[contract.LabelOwnerUID] = parent.UID
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

// checkKeys refuses a field name holding a C1 control character: JSON
// carries it unescaped, and YAML 1.1 reads U+0085 (NEL) as a line break
// and refuses the others, so the object could not be printed as YAML
// (stencil render, kubectl get -o yaml) or would read as another key. A
// key holding a newline or a C0 control is escaped in both and stays.
func checkKeys(v any, path string) error {
	k, at := badKey(v)
	if at == nil {
		return nil
	}
	slices.Reverse(at)
	where := cmp.Or(path+strings.Join(at, ""), "the object's top")
	r := []rune(k)[slices.IndexFunc([]rune(k), isC1)]
	if r == 0x85 {
		return fmt.Errorf("the key %q at %s holds U+0085 (NEL), which YAML reads as a line break: a field name cannot hold it", k, where)
	}
	return fmt.Errorf("the key %q at %s holds %U, a control character YAML cannot print: a field name cannot hold it", k, where, r)
}

// badKey returns the first key of v holding a C1 control (the least, in
// a map that has several) and the path to it, innermost first; a nil
// path when there is none. It allocates nothing when there is none: it
// runs on every child of every render.
func badKey(v any) (string, []string) {
	switch v := v.(type) {
	case map[string]any:
		var bad []string
		for k := range v {
			if strings.ContainsFunc(k, isC1) {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			return slices.Min(bad), []string{}
		}
		for k, e := range v {
			if key, at := badKey(e); at != nil {
				return key, append(at, "."+k)
			}
		}
	case []any:
		for i, e := range v {
			if key, at := badKey(e); at != nil {
				return key, append(at, "["+strconv.Itoa(i)+"]")
			}
		}
	}
	return "", nil
}

// isC1 reports whether r is a C1 control character (U+0080 to U+009F).
func isC1(r rune) bool { return r >= 0x80 && r < 0xa0 }

// OwnerReference returns the controller ownerReference every child of parent carries.
func OwnerReference(parent *view.Object) metav1.OwnerReference {
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
