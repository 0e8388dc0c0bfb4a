package plan

// The pure half of the plan: which fields differ between two versions of an
// object, how identical changes group, and the text and JSON forms.

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"stencil.dev/stencil/contract"
)

// parentRef names the custom resource a child belongs to.
type parentRef struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// fieldChange is one field path whose value would change.
type fieldChange struct {
	Path string
	// Old and New are the values; HasOld and HasNew say whether the field
	// exists at all before and after.
	Old, New       any
	HasOld, HasNew bool
}

// childDiff is one child that would be created, updated or pruned. The
// parent itself appears as an update when its status template would change
// a status field.
type childDiff struct {
	Parent          parentRef
	Kind            string
	Namespace, Name string
	Action          string
	Changes         []fieldChange
}

// failure is a resource, or a child of it, the diff could not plan.
type failure struct {
	Parent  parentRef
	Reason  string
	Message string
}

// Report is what a plan found.
type Report struct {
	Children  []childDiff
	Unchanged int
	Failures  []failure
	// Waiting are the resources whose templates would wait for a child
	// (dependsOn, observed): their children are left as they are.
	Waiting []waiting
	// Held are the resources a rollout would leave as they are for now
	// (their changes are listed all the same, as they move later) and the
	// paused ones (nothing rendered, nothing written).
	Held []waiting
}

// waiting is a resource some of whose templates would wait.
type waiting struct {
	Parent  parentRef `json:"parent"`
	Message string    `json:"message"`
	// Paused says the resource is held by its stencil.dev/paused
	// annotation, not by a rollout: nothing of it is rendered.
	Paused bool `json:"paused,omitempty"`
}

// HasChanges reports whether something would change, or would fail to
// render or apply ("stencil diff" then exits 1).
func (r *Report) HasChanges() bool {
	return len(r.Children) > 0 || len(r.Failures) > 0
}

// count returns the number of children with the action.
func (r *Report) count(action string) int {
	n := 0
	for _, c := range r.Children {
		if c.Action == action {
			n++
		}
	}
	return n
}

// ignoredMetadata are the metadata fields that change on every write, or
// are stencil's bookkeeping, not a change a person reviews.
var ignoredMetadata = []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"}

// objectChanges lists the fields that differ between two versions of an
// object, leaving out status and the bookkeeping metadata: the applied
// hash, and with ignoreRevision the template revision annotation.
func objectChanges(old, new map[string]any, ignoreRevision bool) []fieldChange {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "status" {
				out[k] = v
			}
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			c := make(map[string]any, len(md))
			for k, v := range md {
				if !slices.Contains(ignoredMetadata, k) {
					c[k] = v
				}
			}
			if a, ok := md["annotations"].(map[string]any); ok {
				ac := make(map[string]any, len(a))
				for k, v := range a {
					if k != contract.AnnotationAppliedHash && (!ignoreRevision || k != contract.AnnotationTemplateRevision) {
						ac[k] = v
					}
				}
				c["annotations"] = ac
				if len(ac) == 0 {
					delete(c, "annotations")
				}
			}
			out["metadata"] = c
		}
		return out
	}
	var changes []fieldChange
	walk("", strip(old), strip(new), true, true, &changes)
	return changes
}

// statusChanges lists the status fields that differ between the live
// resource and want.
func statusChanges(parent *unstructured.Unstructured, want map[string]any) []fieldChange {
	live, _ := parent.Object["status"].(map[string]any)
	if live == nil {
		live = map[string]any{}
	}
	var changes []fieldChange
	walk("status", live, want, true, true, &changes)
	return changes
}

// walk appends to out every leaf path where old and new differ. A subtree
// present on one side only is one change. List elements are matched by
// their name when every element has a distinct one, else by index.
func walk(path string, old, new any, hasOld, hasNew bool, out *[]fieldChange) {
	if hasOld && hasNew {
		om, oIsMap := old.(map[string]any)
		nm, nIsMap := new.(map[string]any)
		if oIsMap && nIsMap {
			keys := make([]string, 0, len(om)+len(nm))
			for k := range om {
				keys = append(keys, k)
			}
			for k := range nm {
				if _, ok := om[k]; !ok {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				ov, ook := om[k]
				nv, nok := nm[k]
				walk(joinKey(path, k), ov, nv, ook, nok, out)
			}
			return
		}
		ol, oIsList := old.([]any)
		nl, nIsList := new.([]any)
		if oIsList && nIsList {
			walkList(path, ol, nl, out)
			return
		}
		if reflect.DeepEqual(old, new) {
			return
		}
	}
	*out = append(*out, fieldChange{Path: path, Old: old, New: new, HasOld: hasOld, HasNew: hasNew})
}

// walkList compares two lists, by element name when both are lists of
// uniquely named objects (containers, ports, env, volumes).
func walkList(path string, old, new []any, out *[]fieldChange) {
	oNames, oKeyed := names(old)
	nNames, nKeyed := names(new)
	if !oKeyed || !nKeyed {
		for i := range max(len(old), len(new)) {
			var ov, nv any
			if i < len(old) {
				ov = old[i]
			}
			if i < len(new) {
				nv = new[i]
			}
			walk(fmt.Sprintf("%s[%d]", path, i), ov, nv, i < len(old), i < len(new), out)
		}
		return
	}
	byName := make(map[string]any, len(old))
	for i, n := range oNames {
		byName[n] = old[i]
	}
	for i, n := range nNames {
		ov, ok := byName[n]
		walk(path+"[name="+n+"]", ov, new[i], ok, true, out)
	}
	for i, n := range oNames {
		if !slices.Contains(nNames, n) {
			walk(path+"[name="+n+"]", old[i], nil, true, false, out)
		}
	}
	// Order matters too: containers reordered make a new pod template.
	kept := func(names, other []string) []any {
		var out []any
		for _, n := range names {
			if slices.Contains(other, n) {
				out = append(out, n)
			}
		}
		return out
	}
	if o, n := kept(oNames, nNames), kept(nNames, oNames); !reflect.DeepEqual(o, n) {
		*out = append(*out, fieldChange{Path: path, Old: o, New: n, HasOld: true, HasNew: true})
	}
}

// names returns the name of each element, and whether every element is an
// object with a distinct string name.
func names(list []any) ([]string, bool) {
	out := make([]string, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok || slices.Contains(out, n) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// joinKey appends a map key to a path; a key that would read as more than
// one step (an annotation such as stencil.dev/paused) is quoted.
func joinKey(path, k string) string {
	if strings.ContainsAny(k, ".[]=\" \t") {
		return path + "[" + fmt.Sprintf("%q", k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// formatValue prints a value for the text output: strings bare, other
// values as JSON, an absent field as <none>.
func formatValue(v any, present bool) string {
	if !present {
		return "<none>"
	}
	if s, ok := v.(string); ok && s != "" && !strings.ContainsAny(s, " \n") {
		return s
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// String prints one field change as "path old -> new".
func (c fieldChange) String() string {
	return c.Path + " " + formatValue(c.Old, c.HasOld) + " -> " + formatValue(c.New, c.HasNew)
}

// group is children of one kind with the same action and the same changes.
type group struct {
	action  string
	kind    string
	changes []fieldChange
	objects []string // namespace/name
}

// groupChildren groups identical changes, so that 412 Deployments whose
// image changes read as one line: by action, kind, then first object.
func groupChildren(children []childDiff) []*group {
	byKey := map[string]*group{}
	var groups []*group
	for _, c := range children {
		lines := make([]string, len(c.Changes))
		for i, ch := range c.Changes {
			lines[i] = ch.String()
		}
		key := c.Action + "\x00" + c.Kind + "\x00" + strings.Join(lines, "\x00")
		g, ok := byKey[key]
		if !ok {
			g = &group{action: c.Action, kind: c.Kind, changes: c.Changes}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.objects = append(g.objects, c.Namespace+"/"+c.Name)
	}
	rank := map[string]int{actionCreate: 0, actionUpdate: 1, actionPrune: 2}
	for _, g := range groups {
		sort.Strings(g.objects)
	}
	sort.SliceStable(groups, func(a, b int) bool {
		ga, gb := groups[a], groups[b]
		if ga.action != gb.action {
			return rank[ga.action] < rank[gb.action]
		}
		if ga.kind != gb.kind {
			return ga.kind < gb.kind
		}
		return ga.objects[0] < gb.objects[0]
	})
	return groups
}

// maxNamesShown bounds the objects named under a group.
const maxNamesShown = 10

// WriteText prints the groups, the failures and the summary line.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	symbol := map[string]string{actionCreate: "+", actionUpdate: "~", actionPrune: "-"}
	for _, g := range groupChildren(r.Children) {
		fmt.Fprintf(&b, "%s %s %d %s", symbol[g.action], g.action, len(g.objects), kindNoun(g.kind, len(g.objects)))
		roll := ""
		if g.action == actionUpdate && rollsPods(g.kind, g.changes) {
			roll = " (pods roll)"
		}
		switch len(g.changes) {
		case 0:
			b.WriteString("\n")
		case 1:
			fmt.Fprintf(&b, ": %s%s\n", g.changes[0], roll)
		default:
			b.WriteString(roll + ":\n")
			for _, c := range g.changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
		shown := g.objects[:min(len(g.objects), maxNamesShown)]
		fmt.Fprintf(&b, "    on %s", strings.Join(shown, ", "))
		if more := len(g.objects) - len(shown); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString("\n")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "%s/%s: %s: %s\n", f.Parent.Namespace, f.Parent.Name, f.Reason, f.Message)
	}
	for _, w := range r.Waiting {
		fmt.Fprintf(&b, "%s/%s: WaitingForDependency: %s\n", w.Parent.Namespace, w.Parent.Name, w.Message)
	}
	for _, h := range r.Held {
		fmt.Fprintf(&b, "%s/%s: %s\n", h.Parent.Namespace, h.Parent.Name, h.Message)
	}
	s := r.summary()
	fmt.Fprintf(&b, "%d to create, %d to update, %d to prune, %d unchanged, %d render failures",
		s.Create, s.Update, s.Prune, s.Unchanged, s.RenderFailed)
	if s.ApplyFailed > 0 {
		fmt.Fprintf(&b, ", %d apply failures", s.ApplyFailed)
	}
	if s.Waiting > 0 {
		fmt.Fprintf(&b, ", %d waiting for a dependency", s.Waiting)
	}
	if s.Held > 0 {
		fmt.Fprintf(&b, ", %d held by a rollout (their changes listed, applied as they move)", s.Held)
	}
	if s.Paused > 0 {
		fmt.Fprintf(&b, ", %d paused (%s: nothing rendered or written)", s.Paused, contract.AnnotationPaused)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// rollsPods reports whether changes touch the pod template of a workload
// kind whose controller replaces its pods when the template changes: the
// reader of a plan needs to see which changes restart pods, not only which
// fields move.
func rollsPods(kind string, changes []fieldChange) bool {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet":
	default:
		return false
	}
	for _, c := range changes {
		if strings.HasPrefix(c.Path, "spec.template.") {
			return true
		}
	}
	return false
}

// kindNoun is the kind, in the plural for n != 1, for reading only.
func kindNoun(kind string, n int) string {
	switch {
	case n == 1:
		return kind
	case strings.HasSuffix(kind, "y") && !strings.HasSuffix(kind, "ay"):
		return kind[:len(kind)-1] + "ies"
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"):
		return kind + "es"
	}
	return kind + "s"
}

// summary counts, as -o json prints them.
type summary struct {
	Create       int `json:"create"`
	Update       int `json:"update"`
	Prune        int `json:"prune"`
	Unchanged    int `json:"unchanged"`
	RenderFailed int `json:"renderFailed"`
	// ApplyFailed counts children the API server rejects, and children
	// whose name a foreign object holds.
	ApplyFailed int `json:"applyFailed"`
	// Waiting counts resources some of whose templates would wait.
	Waiting int `json:"waiting"`
	// Held counts resources a rollout would hold for now.
	Held int `json:"held"`
	// Paused counts resources their stencil.dev/paused annotation holds.
	Paused int `json:"paused"`
}

func (r *Report) summary() summary {
	s := summary{Create: r.count(actionCreate), Update: r.count(actionUpdate), Prune: r.count(actionPrune), Unchanged: r.Unchanged, Waiting: len(r.Waiting)}
	for _, h := range r.Held {
		if h.Paused {
			s.Paused++
		} else {
			s.Held++
		}
	}
	for _, f := range r.Failures {
		if f.Reason == reasonRenderFailed || f.Reason == reasonRenderKilled {
			s.RenderFailed++
		} else {
			s.ApplyFailed++
		}
	}
	return s
}

// jsonChild is one element of "children" in -o json.
type jsonChild struct {
	Parent parentRef `json:"parent"`
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	Action string    `json:"action"`
	Fields []string  `json:"fields"`
}

// jsonFailure is one element of "renderFailures" in -o json.
type jsonFailure struct {
	Parent  parentRef `json:"parent"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// WriteJSON prints the report in the schema of docs/operating.md, plus the failures.
func WriteJSON(w io.Writer, r *Report) error {
	out := struct {
		Children       []jsonChild   `json:"children"`
		Summary        summary       `json:"summary"`
		RenderFailures []jsonFailure `json:"renderFailures"`
		Waiting        []waiting     `json:"waiting"`
		Held           []waiting     `json:"held"`
	}{Children: []jsonChild{}, Summary: r.summary(), RenderFailures: []jsonFailure{}, Waiting: append([]waiting{}, r.Waiting...),
		Held: append([]waiting{}, r.Held...)}
	for _, c := range r.Children {
		fields := make([]string, len(c.Changes))
		for i, ch := range c.Changes {
			fields[i] = ch.Path
		}
		out.Children = append(out.Children, jsonChild{Parent: c.Parent, Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: fields})
	}
	for _, f := range r.Failures {
		out.RenderFailures = append(out.RenderFailures, jsonFailure(f))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}
