package configtest

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A golden file holds every child of a render one after another, so a
// hunk's three lines of context (`- image: ...perch:1.9`) rarely say which
// of eight Deployments changed. goldenDiff heads each hunk with the object
// its first change is in and that change's field path, read from where
// each line sits in the YAML tree:
//
//	@@ Deployment team-a/wren-perch .spec.template.spec.containers[0].image @@ -44,7 +44,7
//
// and a hunk never spans two objects: one whose changes fall in two is
// cut in two, each with its own header. The line ranges stay, after the
// header, to find the place in the golden file.

// diffContext is the lines of context around each change, as diff -u.
const diffContext = 3

// place is where a line of a golden document sits: the object it belongs
// to ("Deployment team-a/g"; the resource for status; "" for the rest)
// and the field path in it.
type place struct {
	object, path string
}

// header is the hunk header text of p.
func (p place) header() string {
	if p.object == "" {
		return p.path
	}
	return p.object + " " + p.path
}

// goldenDiff is a unified diff of want (the golden file) and got (the
// render), each hunk headed by its object and field; resource names the
// object status lines belong to.
func goldenDiff(fromName, toName, want, got, resource string) string {
	a, b := splitLines(want), splitLines(got)
	// A golden file edited by hand may not parse: its lines then have no
	// place, and its hunks fall back to the render's places.
	wantAt, gotAt := places(want, resource), places(got, resource)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	m := difflib.NewMatcher(a, b)
	for _, g := range m.GetGroupedOpCodes(diffContext) {
		for _, h := range splitByObject(g, wantAt, gotAt) {
			first, last := h[0], h[len(h)-1]
			at := firstChange(h, wantAt, gotAt)
			fmt.Fprintf(&out, "@@ %s @@ -%s +%s\n", at.header(), unifiedRange(first.I1, last.I2), unifiedRange(first.J1, last.J2))
			for _, op := range h {
				switch op.Tag {
				case 'e':
					writeLines(&out, " ", a[op.I1:op.I2])
				case 'd':
					writeLines(&out, "-", a[op.I1:op.I2])
				case 'i':
					writeLines(&out, "+", b[op.J1:op.J2])
				case 'r':
					writeLines(&out, "-", a[op.I1:op.I2])
					writeLines(&out, "+", b[op.J1:op.J2])
				}
			}
		}
	}
	return strings.TrimRight(out.String(), "\n")
}

// splitLines splits s into lines, each without its newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// writeLines writes each line with prefix.
func writeLines(out *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		out.WriteString(prefix + l + "\n")
	}
}

// unifiedRange is a line range as a unified diff writes it.
func unifiedRange(start, stop int) string {
	switch n := stop - start; n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	default:
		return fmt.Sprintf("%d,%d", start+1, n)
	}
}

// changeAt is the place of op's first changed line: in the golden file
// for a line removed or replaced, in the render for a line added.
func changeAt(op difflib.OpCode, wantAt, gotAt []place) place {
	if op.Tag == 'i' || op.I1 >= len(wantAt) {
		if op.J1 < len(gotAt) {
			return gotAt[op.J1]
		}
		return place{}
	}
	return wantAt[op.I1]
}

// firstChange is the place of a hunk's first change.
func firstChange(h []difflib.OpCode, wantAt, gotAt []place) place {
	for _, op := range h {
		if op.Tag != 'e' {
			return changeAt(op, wantAt, gotAt)
		}
	}
	return place{}
}

// splitByObject cuts a hunk whose changes fall in more than one object
// into one hunk per object, each keeping up to diffContext lines of the
// unchanged lines between them as its context.
func splitByObject(g []difflib.OpCode, wantAt, gotAt []place) [][]difflib.OpCode {
	var out [][]difflib.OpCode
	var cur []difflib.OpCode
	object, started := "", false
	for i, op := range g {
		if op.Tag == 'e' {
			cur = append(cur, op)
			continue
		}
		at := changeAt(op, wantAt, gotAt).object
		if started && at != object && i > 0 && g[i-1].Tag == 'e' {
			// Cut the unchanged run before op where its lines pass from
			// one object to the next: the first object's lines end this
			// hunk, the next's start the other, up to diffContext each,
			// so that no line is in two hunks.
			eq := cur[len(cur)-1]
			n := eq.I2 - eq.I1
			k := (n + 1) / 2
			if wantAt != nil {
				k = 0
				for k < n && eq.I1+k < len(wantAt) && wantAt[eq.I1+k].object == object {
					k++
				}
			}
			headN, tailN := min(diffContext, k), min(diffContext, n-k)
			head := difflib.OpCode{Tag: 'e', I1: eq.I1, I2: eq.I1 + headN, J1: eq.J1, J2: eq.J1 + headN}
			tail := difflib.OpCode{Tag: 'e', I1: eq.I2 - tailN, I2: eq.I2, J1: eq.J2 - tailN, J2: eq.J2}
			cur[len(cur)-1] = head
			out = append(out, cur)
			cur = []difflib.OpCode{tail}
		}
		object, started = at, true
		cur = append(cur, op)
	}
	return append(out, cur)
}

// places returns the place of each line of a golden document (0-based),
// nil when it does not parse. A line takes the place of the deepest node
// that starts on it; a line where none starts (inside a block scalar)
// takes the place of the line before.
func places(doc, resource string) []place {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(doc), &root); err != nil || len(root.Content) != 1 || root.Content[0].Kind != yamlv3.MappingNode {
		return nil
	}
	lines := splitLines(doc)
	at := make([]place, len(lines))
	set := make([]bool, len(lines))
	mark := func(line int, p place) {
		if line >= 1 && line <= len(at) {
			at[line-1], set[line-1] = p, true
		}
	}
	var walk func(n *yamlv3.Node, p place)
	walk = func(n *yamlv3.Node, p place) {
		mark(n.Line, p)
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				sub := place{object: p.object, path: p.path + "." + k.Value}
				mark(k.Line, sub)
				walk(v, sub)
			}
		case yamlv3.SequenceNode:
			for i, item := range n.Content {
				walk(item, place{object: p.object, path: fmt.Sprintf("%s[%d]", p.path, i)})
			}
		}
	}
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch {
		case k.Value == "children" && v.Kind == yamlv3.SequenceNode:
			mark(k.Line, place{path: k.Value})
			for _, child := range v.Content {
				walk(child, place{object: nodeLabel(child)})
			}
		case k.Value == "status":
			mark(k.Line, place{object: resource, path: ".status"})
			walk(v, place{object: resource, path: ".status"})
		default:
			// waits, as waits[0]: not an object's.
			mark(k.Line, place{path: k.Value})
			walk(v, place{path: k.Value})
		}
	}
	for i := range at {
		if !set[i] && i > 0 {
			at[i] = at[i-1]
		}
	}
	return at
}

// nodeLabel names the object a YAML node holds, as objectLabel does.
func nodeLabel(n *yamlv3.Node) string {
	var obj map[string]any
	if n.Decode(&obj) != nil {
		return ""
	}
	return objectLabel(&unstructured.Unstructured{Object: obj})
}

// objectLabel names an object as a reader finds it: kind and
// namespace/name (name alone when cluster-scoped).
func objectLabel(u *unstructured.Unstructured) string {
	name := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return strings.TrimSpace(u.GetKind() + " " + name)
}
