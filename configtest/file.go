// Package configtest runs a platform team's offline tests of its config
// ("stencil test"): cases in YAML next to the config, each a custom
// resource rendered as the controller would render it (children in
// dependsOn order given the observed children, and the status it would
// patch), checked against a golden file, CEL assertions or an expected
// error, every rendered object checked against its schema, and every case
// rendered twice.
//
// The design choice a newcomer may question: a case renders through the
// same compiled sets, and the same render wall, as "stencil run" and
// "stencil render", and its status comes from the controller's own status
// package; nothing here re-implements a render. What a case proves is what
// the controller would do with that resource, not what a test double does.
package configtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/templates/view"
)

// File is one test file: its cases, in file order.
type File struct {
	// Path is the file as given or found.
	Path string
	// Cases are its cases.
	Cases []*Case
	// CostLimit is the file's costLimit: each of its assertions' cost
	// limit, unless its case sets one; 0 means DefaultCostLimit.
	CostLimit int64
}

// Case is one test case (docs/testing-configs.md).
type Case struct {
	// Name names the case in output, unique in its file.
	Name string `json:"name"`
	// Resource is the custom resource: a file (relative to the test
	// file), or the object inline.
	Resource json.RawMessage `json:"resource"`
	// Entry picks the config entry by plural where several serve the
	// resource's group and version.
	Entry string `json:"entry,omitempty"`
	// Observed are the live children the templates see (readiness,
	// dependsOn, observed): files, or objects inline.
	Observed []json.RawMessage `json:"observed,omitempty"`
	// Reads are the objects the entry's reads see: files, or objects
	// inline; one without a namespace is in the resource's.
	Reads []json.RawMessage `json:"reads,omitempty"`
	// RBAC, for an entry with an identity, are the ServiceAccounts,
	// Roles, ClusterRoles and bindings the cluster holds: files, or
	// objects inline; one without a namespace is in the resource's.
	// Without them the identity's account exists and may write anything.
	RBAC []json.RawMessage `json:"rbac,omitempty"`
	// Golden is the file of the whole render (children and status),
	// relative to the test file; --update writes it.
	Golden string `json:"golden,omitempty"`
	// Ignore lists field paths (dotted, from each object's root) that the
	// golden comparison shows as ignored instead of comparing.
	Ignore []string `json:"ignore,omitempty"`
	// Assert are CEL expressions over the render, each true to pass.
	Assert []Assertion `json:"assert,omitempty"`
	// Error, when set, says the render must fail with a message holding
	// this text.
	Error string `json:"error,omitempty"`
	// CostLimit, when set, is the cost limit of each of the case's
	// assertions, over the file's costLimit and DefaultCostLimit.
	CostLimit *int64 `json:"costLimit,omitempty"`

	// file is the test file the case is in; index its place there.
	file  string
	index int
	// golden is Golden resolved (symlinks followed) inside the roots: the
	// file read and written; goldenName is how messages name it.
	golden, goldenName string
	// resource and observed are the decoded objects.
	resource *unstructured.Unstructured
	observed []*unstructured.Unstructured
	reads    []*unstructured.Unstructured
	rbac     []*unstructured.Unstructured
}

// Assertion is a CEL expression, and the message a failure prints.
type Assertion struct {
	Expr    string `json:"expr"`
	Message string `json:"message,omitempty"`
}

// UnmarshalJSON takes an assertion as its expression alone, or as
// {expr, message}.
func (a *Assertion) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &a.Expr)
	}
	type plain Assertion
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode((*plain)(a))
}

// Objects returns the case's resource (as the file gives it, in the
// "default" namespace where it names none), its observed children and
// the objects its reads see, decoded; copies, for a caller to change.
func (c *Case) Objects() (resource *unstructured.Unstructured, observed, reads []*unstructured.Unstructured) {
	copies := func(l []*unstructured.Unstructured) []*unstructured.Unstructured {
		out := make([]*unstructured.Unstructured, len(l))
		for i, u := range l {
			out[i] = u.DeepCopy()
		}
		return out
	}
	return c.resource.DeepCopy(), copies(c.observed), copies(c.reads)
}

// ID names the case: its file and name.
func (c *Case) ID() string { return c.file + ": " + c.Name }

// FileError is a test file that cannot be run, naming the file and the
// field ("stencil test" exits 2).
type FileError struct {
	File, Field string
	Err         error
}

// Error implements error.
func (e *FileError) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the problem.
func (e *FileError) Unwrap() error { return e.Err }

// Find lists the test files paths name: a file as is, a directory's
// *.yaml and *.yml files (not its subdirectories, which hold the objects
// and golden files the cases name), sorted. No path means the tests/
// directory next to the config.
func Find(configPath string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{filepath.Join(filepath.Dir(configPath), "tests")}
	}
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			name := e.Name()
			if !e.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) && !strings.Contains(name, ".golden.") {
				out = append(out, filepath.Join(p, name))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Load reads and checks the test file at path, for the config at
// configPath: every field known, every case named once, with a resource
// and something to check, every file it names there, and inside the test
// file's directory tree or the config's (symlinks followed).
func Load(path, configPath string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{File: path, Err: err}
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &FileError{File: path, Err: fmt.Errorf("not valid YAML: %w", err)}
	}
	var top struct {
		Cases     []json.RawMessage `json:"cases"`
		CostLimit *int64            `json:"costLimit,omitempty"`
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(&top); err != nil {
		return nil, &FileError{File: path, Err: fmt.Errorf("want a mapping with a cases list: %w", err)}
	}
	if len(top.Cases) == 0 {
		return nil, &FileError{File: path, Field: "cases", Err: errors.New("no cases")}
	}
	f := &File{Path: path}
	if top.CostLimit != nil {
		if *top.CostLimit < 1 {
			return nil, &FileError{File: path, Field: "costLimit", Err: fmt.Errorf("is %d, want at least 1", *top.CostLimit)}
		}
		f.CostLimit = *top.CostLimit
	}
	rts, err := newRoots(path, configPath)
	if err != nil {
		return nil, &FileError{File: path, Err: err}
	}
	names := map[string]int{}
	var errs []error
	for i, raw := range top.Cases {
		c, err := loadCase(path, rts, i, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := names[c.Name]; dup {
			errs = append(errs, &FileError{File: path, Field: fmt.Sprintf("cases[%d].name", i), Err: fmt.Errorf("%q is also cases[%d]'s name", c.Name, j)})
			continue
		}
		names[c.Name] = i
		f.Cases = append(f.Cases, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// loadCase decodes cases[i] of the file at path, whose files resolve
// inside rts.
func loadCase(path string, rts roots, i int, raw json.RawMessage) (*Case, error) {
	field := fmt.Sprintf("cases[%d]", i)
	fail := func(sub string, err error) error {
		if sub != "" {
			field += "." + sub
		}
		return &FileError{File: path, Field: field, Err: err}
	}
	c := &Case{file: path, index: i}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(c); err != nil {
		return nil, fail("", err)
	}
	if c.Name == "" {
		return nil, fail("name", errors.New("every case needs a name"))
	}
	field = fmt.Sprintf("cases[%d] (%s)", i, c.Name)
	if len(c.Resource) == 0 {
		return nil, fail("resource", errors.New("is required: a file, or the object inline"))
	}
	if c.Golden == "" && len(c.Assert) == 0 && c.Error == "" {
		return nil, fail("", errors.New("checks nothing: give golden, assert or error"))
	}
	if c.Error != "" && (c.Golden != "" || len(c.Assert) > 0) {
		return nil, fail("error", errors.New("a case that expects an error has no render to check: drop golden and assert"))
	}
	if c.CostLimit != nil && *c.CostLimit < 1 {
		return nil, fail("costLimit", fmt.Errorf("is %d, want at least 1", *c.CostLimit))
	}
	base := filepath.Dir(path)
	if c.Golden != "" {
		// Checked here, before any case runs: --update writes nothing
		// when a file is invalid.
		golden, err := rts.resolve(base, c.Golden)
		if err != nil {
			return nil, fail("golden", err)
		}
		c.golden = golden
		c.goldenName = c.Golden
		if !filepath.IsAbs(c.goldenName) {
			c.goldenName = filepath.Join(base, c.goldenName)
		}
	}
	objs, err := objects(rts, base, c.Resource)
	if err != nil {
		return nil, fail("resource", err)
	}
	if len(objs) != 1 {
		return nil, fail("resource", fmt.Errorf("holds %d objects, want one", len(objs)))
	}
	c.resource = objs[0]
	if c.resource.GetNamespace() == "" {
		c.resource.SetNamespace("default")
	}
	if c.resource.GetGeneration() == 0 {
		// As the API server stores it.
		c.resource.SetGeneration(1)
	}
	for j, o := range c.Observed {
		objs, err := objects(rts, base, o)
		if err != nil {
			return nil, fail(fmt.Sprintf("observed[%d]", j), err)
		}
		for _, u := range objs {
			if u.GetNamespace() == "" {
				u.SetNamespace(c.resource.GetNamespace())
			}
		}
		c.observed = append(c.observed, objs...)
	}
	for j, o := range c.Reads {
		objs, err := objects(rts, base, o)
		if err != nil {
			return nil, fail(fmt.Sprintf("reads[%d]", j), err)
		}
		c.reads = append(c.reads, objs...)
	}
	for j, o := range c.RBAC {
		objs, err := objects(rts, base, o)
		if err != nil {
			return nil, fail(fmt.Sprintf("rbac[%d]", j), err)
		}
		for _, u := range objs {
			if !rbacKinds[u.GroupVersionKind().GroupKind()] {
				return nil, fail(fmt.Sprintf("rbac[%d]", j), fmt.Errorf("%s %s: rbac holds ServiceAccounts, Roles, ClusterRoles and their bindings", u.GetKind(), u.GetName()))
			}
			if u.GetNamespace() == "" && u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" {
				u.SetNamespace(c.resource.GetNamespace())
			}
		}
		c.rbac = append(c.rbac, objs...)
	}
	return c, nil
}

// rbacKinds are the kinds a case's rbac holds.
var rbacKinds = map[schema.GroupKind]bool{
	{Kind: "ServiceAccount"}:                                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:               true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: true,
}

// objects reads raw, a file name (relative to base, the test file's
// directory, and resolved inside rts) or an object inline, into objects.
func objects(rts roots, base string, raw json.RawMessage) ([]*unstructured.Unstructured, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		p, err := rts.resolve(base, name)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return decodeObjects(data)
	}
	return decodeObjects(raw)
}

// decodeObjects decodes a YAML or JSON stream of objects
// (view.DecodeObjects), skipping empty mappings too.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	objs, err := view.DecodeObjects(data)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(objs, func(u *unstructured.Unstructured) bool { return len(u.Object) == 0 }), nil
}
