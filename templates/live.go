package templates

import (
	"errors"
	"fmt"
	"slices"
	"text/template"
	"text/template/parse"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"stencil.dev/stencil/config"
)

// Children that depend on each other (DESIGN.md). A render may read the
// resource's own live children: `observed KIND NAME` returns one as a map,
// `ready KIND NAME` says whether it exists and is ready, and a template
// with dependsOn renders only once every child of the templates it names
// is ready. A template that cannot render yet waits: Result.Waits says
// which, and for which child, and the caller leaves that template's
// children as they are. Waiting is not a failure, and nothing here asks
// the API server: the caller's Live answers from what it already holds.

// Live is what a render may read of the resource's live children: the
// controller's caches, or the files of stencil render --observed.
type Live interface {
	// Child returns the resource's own live child of that kind and name.
	Child(kind, name string) (*unstructured.Unstructured, bool)
	// Ready applies stencil's readiness rules (kstatus) to a live child.
	Ready(u *unstructured.Unstructured) bool
	// Current reports whether live already is what want renders: a child
	// about to be written is not ready for those that depend on it, even
	// if its old version is.
	Current(want, live *unstructured.Unstructured) bool
}

// Wait says why one template did not render.
type Wait struct {
	// Template names the waiting template: its id, or its path.
	Template string
	// For names the child it waits for, as Kind/name.
	For string
	// Reason is "does not exist", "is being updated" or "is not ready".
	Reason string
}

// String reads "app waits for Service/db, which does not exist".
func (w Wait) String() string {
	return fmt.Sprintf("%s waits for %s, which %s", w.Template, w.For, w.Reason)
}

// Result is one render of a custom resource.
type Result struct {
	// Children are the children of the templates that rendered, in
	// template order and then document order.
	Children []*unstructured.Unstructured
	// Status is what the status template rendered; nil without one, or
	// when it waits (StatusWaits): then the status keeps its last fields.
	Status map[string]any
	// StatusWaits says the status template read a child that does not
	// exist yet.
	StatusWaits bool
	// Waits lists the templates that did not render, in template order.
	Waits []Wait
	// Release is a chart entry's release name (the resource's name);
	// empty for a template entry.
	Release string
	// Hooks name the hooks and tests a chart rendered, which stencil
	// does not apply.
	Hooks []string
	// Notes is a chart's rendered NOTES.txt.
	Notes string
	// Dropped lists the spec's fields a chart entry's API does not
	// declare ("spec.a.b"), which the chart was not given.
	Dropped []string
}

// waitError is what observed returns for a child that does not exist: the
// template waits for it.
type waitError struct{ kind, name string }

func (e *waitError) Error() string {
	return fmt.Sprintf("%s/%s does not exist yet", e.kind, e.name)
}

// Names of the functions that read live children.
const (
	funcObserved = "observed"
	funcReady    = "ready"
)

// liveFuncs are observed and ready, reading e's live children.
func (s *Set) liveFuncs(e *executor) template.FuncMap {
	return template.FuncMap{
		funcObserved: func(kind, name string) (map[string]any, error) {
			if err := s.observable(kind); err != nil {
				return nil, err
			}
			ref := kind + "/" + name
			if v, ok := e.views[ref]; ok {
				// One copy per child and render: a loop that reads a
				// large child costs its size once.
				return v, nil
			}
			u, ok := e.child(kind, name)
			if !ok {
				return nil, &waitError{kind: kind, name: name}
			}
			v := observedView(u)
			e.views[ref] = v
			return v, nil
		},
		funcRead: s.readFunc(e),
		funcReady: func(kind, name string) (bool, error) {
			if err := s.observable(kind); err != nil {
				return false, err
			}
			u, ok := e.child(kind, name)
			return ok && e.ready(u, e.checks[kind+"/"+name]), nil
		},
	}
}

// observable refuses a kind the entry's children list does not name: a
// template reads only the resource's own children.
func (s *Set) observable(kind string) error {
	for _, k := range s.kinds {
		if k.Kind == kind {
			return nil
		}
	}
	return fmt.Errorf("%s is not a kind this entry's children list names", kind)
}

// observedView is a live child as templates see it: a copy, without
// managedFields, and a Secret without data or stringData, which are never
// readable through stencil.
func observedView(u *unstructured.Unstructured) map[string]any {
	out := runtime.DeepCopyJSON(u.Object)
	if md, ok := out["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	if u.GetKind() == "Secret" && u.GroupVersionKind().Group == "" {
		delete(out, "data")
		delete(out, "stringData")
	}
	return out
}

// child looks a live child up; none without a Live.
func (e *executor) child(kind, name string) (*unstructured.Unstructured, bool) {
	if e.live == nil {
		return nil, false
	}
	return e.live.Child(kind, name)
}

// ready applies checks (a template's readyWhen for the child's kind) to u,
// or stencil's readiness rules where there are none.
func (e *executor) ready(u *unstructured.Unstructured, checks []config.ReadyCheck) bool {
	if len(checks) == 0 {
		return e.live != nil && e.live.Ready(u)
	}
	for _, c := range checks {
		if !c.Holds(u.Object) {
			return false
		}
	}
	return true
}

// blocked returns why t cannot render yet: a template it depends on waits,
// or has a child that does not exist or is not ready.
func (e *executor) blocked(t config.Template, byName map[string]config.Template, rendered map[string][]*unstructured.Unstructured, waiting map[string]Wait) (Wait, bool) {
	for _, dep := range t.DependsOn {
		if w, ok := waiting[dep]; ok {
			return Wait{Template: t.Name(), For: w.For, Reason: w.Reason}, true
		}
		checks := byName[dep].ReadyWhen
		for _, want := range rendered[dep] {
			ref := want.GetKind() + "/" + want.GetName()
			live, ok := e.child(want.GetKind(), want.GetName())
			if !ok {
				return Wait{Template: t.Name(), For: ref, Reason: "does not exist"}, true
			}
			if !e.live.Current(want, live) {
				return Wait{Template: t.Name(), For: ref, Reason: "is being updated"}, true
			}
			var kindChecks []config.ReadyCheck
			for _, c := range checks {
				if c.Kind == want.GetKind() {
					kindChecks = append(kindChecks, c)
				}
			}
			if len(checks) > 0 && len(kindChecks) == 0 {
				// readyWhen names other kinds: this child does not count.
				continue
			}
			if !e.ready(live, kindChecks) {
				return Wait{Template: t.Name(), For: ref, Reason: "is not ready"}, true
			}
		}
	}
	return Wait{}, false
}

// waitedFor reports whether err is a template waiting for a child, and
// which.
func waitedFor(err error) (string, bool) {
	var we *waitError
	if errors.As(err, &we) {
		return we.kind + "/" + we.name, true
	}
	return "", false
}

// readsLive reports whether any template of the set reads live children
// (observed, ready) or waits for another (dependsOn): its render then
// depends on more than the custom resource.
func readsLive(res config.Resource, root *template.Template) bool {
	for _, t := range res.Templates {
		if len(t.DependsOn) > 0 {
			return true
		}
	}
	for _, t := range root.Templates() {
		if t.Tree != nil && mentions(t.Tree.Root, funcObserved, funcReady) {
			return true
		}
	}
	return false
}

// mentions reports whether the parse tree n calls any of names, in any
// command of any pipe (walkCommands: arguments that are pipes or chains,
// such as (observed "Service" "db").spec, included).
func mentions(n parse.Node, names ...string) bool {
	found := false
	walkCommands(n, func(c *parse.CommandNode) {
		for _, a := range c.Args {
			if id, ok := a.(*parse.IdentifierNode); ok && slices.Contains(names, id.Ident) {
				found = true
			}
		}
	})
	return found
}
