package reconcile

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reconcile/status"
	"stencil.dev/stencil/controller/requeue"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

func demoSpec() map[string]any {
	return map[string]any{"image": "nginx:1.27", "replicas": int64(2), "port": int64(80)}
}

// withConditions returns a copy of parent whose status holds conds, as an
// earlier sync of the same generation would have written them.
func withConditions(parent *unstructured.Unstructured, conds ...metav1.Condition) *unstructured.Unstructured {
	parent = parent.DeepCopy()
	st := status.Current(parent)
	st["observedGeneration"] = parent.GetGeneration()
	for i := range conds {
		conds[i].ObservedGeneration = parent.GetGeneration()
		conds[i].LastTransitionTime = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	status.SetConditions(st, conds)
	parent.Object["status"] = st
	return parent
}

func condition(typ string, st metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: message}
}

var (
	wasConverging = []metav1.Condition{
		condition(contract.ConditionReady, metav1.ConditionFalse, status.ReasonProgressing, "0 of 2 children ready"),
		condition(contract.ConditionReconciling, metav1.ConditionTrue, status.ReasonProgressing, "0 of 2 children ready"),
	}
	wasStalled = []metav1.Condition{
		condition(contract.ConditionReady, metav1.ConditionFalse, status.ReasonRenderFailed, "bad template input"),
		condition(contract.ConditionStalled, metav1.ConditionTrue, status.ReasonRenderFailed, "bad template input"),
	}
)

// syncDemo runs one sync of WebApp ns/demo over the fixture's objects and
// returns the API actions. A non-nil applyErr is the API server's answer to
// every Deployment apply.
func (f *fixture) syncDemo(applyErr error) ([]core.Action, error) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	// The first status is written at once: these tests read its conditions.
	f.firstStatusDelay = -1
	f.newReconciler(ctx)
	if applyErr != nil {
		// A new child is created (POST); an existing one is applied.
		for _, verb := range []string{"create", "patch"} {
			f.client.PrependReactor(verb, "deployments", func(core.Action) (bool, runtime.Object, error) {
				return true, nil, applyErr
			})
		}
	}
	err := f.sync(ctx, Key{GVR: webappGVR, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}})
	var actions []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			actions = append(actions, a)
		}
	}
	return actions, err
}

// feedBack applies the status patch among actions to the WebApp in the
// fixture's cache and API, as the watch would deliver it, and returns the
// conditions it now has by type.
func (f *fixture) feedBack(actions []core.Action) map[string]metav1.Condition {
	f.t.Helper()
	var patch []byte
	for _, a := range actions {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			patch = a.(core.PatchAction).GetPatch()
		}
	}
	if patch == nil {
		f.t.Fatal("no status patch")
	}
	for _, objs := range [][]*unstructured.Unstructured{f.cache, f.api} {
		for i, o := range objs {
			if o.GetKind() != "WebApp" {
				continue
			}
			data, err := json.Marshal(o.Object)
			must(f.t, err)
			data, err = jsonpatch.MergePatch(data, patch)
			must(f.t, err)
			u := &unstructured.Unstructured{}
			must(f.t, u.UnmarshalJSON(data))
			objs[i] = u
		}
	}
	for _, o := range f.cache {
		if o.GetKind() == "WebApp" {
			out := map[string]metav1.Condition{}
			for _, c := range status.Conditions(status.Current(o)) {
				out[c.Type] = c
			}
			return out
		}
	}
	f.t.Fatal("no WebApp in the cache")
	return nil
}

// TestConditionsInEachState checks the kstatus conditions stencil writes
// next to Ready: Reconciling while converging, Stalled while only a person
// can help, neither when Ready, never both; and that writing them once makes
// the next sync of the same state cost no status patch.
func TestConditionsInEachState(t *testing.T) {
	foreign := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "demo", "namespace": "ns", "uid": "foreign"},
	}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "demo",
		field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")})
	timeout := apierrors.NewServerTimeout(deploymentGVR.GroupResource(), "patch", 1)
	creates := []string{
		"get deployments demo", "patch deployments demo (apply)",
		"get services demo", "patch services demo (apply)",
		"patch webapps/status demo",
	}
	paused := func(p *unstructured.Unstructured) *unstructured.Unstructured {
		p.SetAnnotations(map[string]string{contract.AnnotationPaused: "true"})
		return p
	}

	for _, tc := range []struct {
		name string
		// objects returns the cache's and the API's objects.
		objects  func(t *testing.T) (cache, api []*unstructured.Unstructured)
		applyErr error
		actions  []string
		err      string // "none", "terminal" or "retried"
		ready    string // status/reason of Ready
		progress string // type/reason of Reconciling or Stalled, "" for neither
	}{
		{
			name: "children not ready yet",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p := webapp("demo", demoSpec())
				return []*unstructured.Unstructured{p}, []*unstructured.Unstructured{p}
			},
			actions: creates, err: "none", ready: "False/Progressing", progress: "Reconciling/Progressing",
		},
		{
			name: "every child ready, was converging",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p, children := converged(t, webapp("demo", demoSpec()))
				return append([]*unstructured.Unstructured{withConditions(p, wasConverging...)}, children...), nil
			},
			actions: []string{"patch webapps/status demo"}, err: "none", ready: "True/AllChildrenReady",
		},
		{
			name: "render fails, was converging",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p := withConditions(webapp("demo", map[string]any{"replicas": int64(2)}), wasConverging...)
				return []*unstructured.Unstructured{p}, nil
			},
			actions: []string{"patch webapps/status demo"}, err: "terminal",
			ready: "False/RenderFailed", progress: "Stalled/RenderFailed",
		},
		{
			name: "a child is rejected as invalid",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p := webapp("demo", demoSpec())
				return []*unstructured.Unstructured{p}, []*unstructured.Unstructured{p}
			},
			applyErr: invalid, actions: creates, err: "terminal",
			ready: "False/ApplyFailed", progress: "Stalled/ApplyFailed",
		},
		{
			name: "an apply times out, was stalled",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p := withConditions(webapp("demo", demoSpec()), wasStalled...)
				return []*unstructured.Unstructured{p}, []*unstructured.Unstructured{p}
			},
			applyErr: timeout, actions: creates, err: "retried",
			ready: "False/ApplyFailed", progress: "Reconciling/ApplyFailed",
		},
		{
			name: "a Deployment is past its progress deadline, was converging",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p, children := converged(t, webapp("demo", demoSpec()))
				p = withConditions(p, wasConverging...)
				for _, c := range children {
					if c.GetKind() == "Deployment" {
						must(t, unstructured.SetNestedField(c.Object, int64(0), "status", "availableReplicas"))
						must(t, unstructured.SetNestedSlice(c.Object, []any{map[string]any{
							"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
							"message": `ReplicaSet "demo-1" has timed out progressing.`,
						}}, "status", "conditions"))
					}
				}
				return append([]*unstructured.Unstructured{p}, children...), nil
			},
			actions: []string{"patch webapps/status demo"}, err: "none",
			ready: "False/ChildFailed", progress: "Stalled/ChildFailed",
		},
		{
			name: "a foreign Service holds the name",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p, children := converged(t, webapp("demo", demoSpec()))
				return []*unstructured.Unstructured{p, children[0]}, []*unstructured.Unstructured{foreign}
			},
			actions: []string{"get services demo", "patch webapps/status demo"}, err: "none",
			ready: "False/OwnershipConflict", progress: "Stalled/OwnershipConflict",
		},
		{
			name: "paused when Ready",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				p, children := converged(t, webapp("demo", demoSpec()))
				return append([]*unstructured.Unstructured{paused(p)}, children...), nil
			},
			actions: []string{"patch webapps/status demo"}, err: "none", ready: "False/Paused",
		},
		{
			name: "paused while converging",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				return []*unstructured.Unstructured{paused(withConditions(webapp("demo", demoSpec()), wasConverging...))}, nil
			},
			actions: []string{"patch webapps/status demo"}, err: "none", ready: "False/Paused",
		},
		{
			name: "paused while stalled",
			objects: func(t *testing.T) (cache, api []*unstructured.Unstructured) {
				return []*unstructured.Unstructured{paused(withConditions(webapp("demo", demoSpec()), wasStalled...))}, nil
			},
			actions: []string{"patch webapps/status demo"}, err: "none", ready: "False/Paused", progress: "Stalled/RenderFailed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.cache, f.api = tc.objects(t)
			actions, err := f.syncDemo(tc.applyErr)
			switch {
			case tc.err == "none" && err != nil, tc.err == "terminal" && !requeue.IsTerminal(err), tc.err == "retried" && (err == nil || requeue.IsTerminal(err)):
				t.Fatalf("err = %v, want %s", err, tc.err)
			}
			expectActions(t, actions, tc.actions...)
			conds := f.feedBack(actions)

			ready := conds[contract.ConditionReady]
			if got := string(ready.Status) + "/" + ready.Reason; got != tc.ready {
				t.Errorf("Ready = %s, want %s", got, tc.ready)
			}
			var progress []string
			for _, typ := range []string{contract.ConditionReconciling, contract.ConditionStalled} {
				c, ok := conds[typ]
				if !ok {
					continue
				}
				progress = append(progress, typ+"/"+c.Reason)
				if c.Status != metav1.ConditionTrue {
					t.Errorf("%s is present with status %s: it must be present only while True", typ, c.Status)
				}
				if c.ObservedGeneration != 1 {
					t.Errorf("%s observedGeneration = %d, want 1", typ, c.ObservedGeneration)
				}
				if ready.Reason != status.ReasonPaused && (c.Reason != ready.Reason || c.Message != ready.Message) {
					t.Errorf("%s says %s %q, Ready says %s %q: want Ready's reason and message", typ, c.Reason, c.Message, ready.Reason, ready.Message)
				}
			}
			if got := strings.Join(progress, ", "); got != tc.progress {
				t.Errorf("Reconciling/Stalled = %q, want %q", got, tc.progress)
			}
			if meta.IsStatusConditionTrue(conditionsList(conds), contract.ConditionReady) && len(progress) > 0 {
				t.Errorf("Ready is True with %s", progress)
			}

			// The same state again: the status stencil wrote is the one it
			// wants, so no status patch.
			actions, _ = f.syncDemo(tc.applyErr)
			for _, a := range describe(actions) {
				if strings.HasPrefix(a, "patch webapps/status") {
					t.Errorf("a second sync in the same state patched the status again: %s", describe(actions))
				}
			}
		})
	}
}

func conditionsList(m map[string]metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range m {
		out = append(out, c)
	}
	return out
}
