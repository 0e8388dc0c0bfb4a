package chart

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// linked are the functions stencil pulls from other packages by
// go:linkname, by their local name: the declaration's type is what
// stencil calls them with.
var linked = map[string]any{
	"helmFuncMap":    helmFuncMap,
	"helmParseError": helmParseError,
	"helmExecError":  helmExecError,
}

// A go:linkname binds a name, not a type: were Helm to change one of the
// functions stencil pulls (another parameter, another result), the link
// would still succeed and the call would misbehave at run time. Every
// go:linkname in the module is checked here: the function it names, read
// from the source of the version go.mod pins, has the type stencil
// declares for it (reflect), and a new link fails until it is listed in
// linked.
func TestLinkedSignaturesMatch(t *testing.T) {
	links := linknames(t)
	if len(links) == 0 {
		t.Fatal("no go:linkname found in the module: the scan is broken")
	}
	for _, l := range links {
		fn, ok := linked[l.local]
		if !ok {
			t.Errorf("%s: //go:linkname %s %s is not checked: add %s to linked in templates/chart/linkname_test.go", l.at, l.local, l.target, l.local)
			continue
		}
		want := reflect.TypeOf(fn).String()
		got, err := sourceSignature(l.target)
		if err != nil {
			t.Errorf("%s: %s: %v", l.at, l.target, err)
			continue
		}
		if got != want {
			t.Errorf("%s: %s is %s in the pinned source, but stencil declares %s %s: change the declaration with the upgrade", l.at, l.target, got, l.local, want)
		}
	}
}

// A changed signature is seen: the check compares the source's
// rendering with reflect's.
func TestSignatureRendering(t *testing.T) {
	src := "package engine\nimport \"text/template\"\n" +
		"func a() template.FuncMap { return nil }\n" +
		"func b(filename string, err error) error { return nil }\n" +
		"func c(x, y any, z ...map[string][]*int) (string, error) { return \"\", nil }\n"
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a": reflect.TypeOf(helmFuncMap).String(),
		"b": reflect.TypeOf(helmParseError).String(),
		"c": reflect.TypeOf(func(x, y any, z ...map[string][]*int) (string, error) { return "", nil }).String(),
	}
	decls := map[string]*ast.FuncType{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			decls[fd.Name.Name] = fd.Type
		}
	}
	for name, w := range want {
		if got := funcString("engine", decls[name]); got != w {
			t.Errorf("%s renders as %q, reflect says %q", name, got, w)
		}
	}
	if funcString("engine", decls["b"]) == reflect.TypeOf(func(string, error, bool) error { return nil }).String() {
		t.Error("an added parameter is not seen")
	}
}

// link is one //go:linkname directive.
type link struct{ at, local, target string }

// linknames returns every //go:linkname directive in the module's Go
// files.
func linknames(t *testing.T) []link {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two levels up: %v", err)
	}
	var out []link
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			fields := strings.Fields(sc.Text())
			if len(fields) == 3 && fields[0] == "//go:linkname" {
				rel, _ := filepath.Rel(root, path)
				out = append(out, link{at: rel + ":" + strconv.Itoa(n), local: fields[1], target: fields[2]})
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sourceSignature is the type of function target ("import/path.name"),
// read from the source of the package as the module resolves it, in
// reflect's rendering.
func sourceSignature(target string) (string, error) {
	i := strings.LastIndex(target, ".")
	pkg, name := target[:i], target[i+1:]
	dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		return "", err
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "*.go"))
	if err != nil {
		return "", err
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
				return funcString(f.Name.Name, fd.Type), nil
			}
		}
	}
	return "", os.ErrNotExist
}

// funcString renders a function type as reflect.Type.String does, the
// package's own types qualified by its name pkg.
func funcString(pkg string, ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) []string {
		var out []string
		if fl == nil {
			return out
		}
		for _, f := range fl.List {
			for range max(1, len(f.Names)) {
				out = append(out, typeString(pkg, f.Type))
			}
		}
		return out
	}
	s := "func(" + strings.Join(list(ft.Params), ", ") + ")"
	switch res := list(ft.Results); len(res) {
	case 0:
	case 1:
		s += " " + res[0]
	default:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}

// typeString renders a type expression as reflect does: any is
// "interface {}", and a name declared in pkg is qualified.
func typeString(pkg string, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		if e.Name == "any" {
			return "interface {}"
		}
		if types.Universe.Lookup(e.Name) != nil {
			return e.Name
		}
		return pkg + "." + e.Name
	case *ast.SelectorExpr:
		return types.ExprString(e)
	case *ast.StarExpr:
		return "*" + typeString(pkg, e.X)
	case *ast.Ellipsis:
		return "..." + typeString(pkg, e.Elt)
	case *ast.ArrayType:
		if e.Len == nil {
			return "[]" + typeString(pkg, e.Elt)
		}
		return "[" + types.ExprString(e.Len) + "]" + typeString(pkg, e.Elt)
	case *ast.MapType:
		return "map[" + typeString(pkg, e.Key) + "]" + typeString(pkg, e.Value)
	case *ast.FuncType:
		return funcString(pkg, e)
	case *ast.InterfaceType:
		if e.Methods == nil || len(e.Methods.List) == 0 {
			return "interface {}"
		}
	}
	return types.ExprString(e)
}
