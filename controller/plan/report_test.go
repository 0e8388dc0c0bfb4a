package plan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func deployment(image string, extra func(map[string]any)) map[string]any {
	d := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "team-a", "uid": "u1", "resourceVersion": "7", "generation": int64(2),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"managedFields":     []any{map[string]any{"manager": "stencil"}},
			"annotations":       map[string]any{"stencil.dev/applied-hash": "aaaa"},
			"labels":            map[string]any{"app": "web"},
		},
		"spec": map[string]any{
			"replicas": int64(2),
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "sidecar", "image": "envoy:1"},
				map[string]any{"name": "web", "image": image, "args": []any{"-a", "-b"}},
			}}},
		},
		"status": map[string]any{"readyReplicas": int64(2)},
	}
	if extra != nil {
		extra(d)
	}
	return d
}

func TestObjectChanges(t *testing.T) {
	spec := func(d map[string]any) map[string]any { return d["spec"].(map[string]any) }
	containers := func(d map[string]any) []any {
		return spec(d)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	}
	for _, tc := range []struct {
		name   string
		old    map[string]any
		new    map[string]any
		want   []string
		values [][2]string
		// stamped: the controller stamps the revision on children, so
		// the revision annotation is a change like any other.
		stamped bool
	}{{
		name: "an earlier stencil's revision annotation, dropped with the next write, is no change",
		old: deployment("nginx:1.27", func(d map[string]any) {
			d["metadata"].(map[string]any)["annotations"] = map[string]any{"stencil.dev/applied-hash": "aaaa", "stencil.dev/template-revision": "r1"}
		}),
		new: deployment("nginx:1.27", nil),
	}, {
		name: "a revision stamped on children is a change",
		old: deployment("nginx:1.27", func(d map[string]any) {
			d["metadata"].(map[string]any)["annotations"] = map[string]any{"stencil.dev/applied-hash": "aaaa", "stencil.dev/template-revision": "r1"}
		}),
		new: deployment("nginx:1.27", func(d map[string]any) {
			d["metadata"].(map[string]any)["annotations"] = map[string]any{"stencil.dev/applied-hash": "bbbb", "stencil.dev/template-revision": "r2"}
		}),
		stamped: true,
		want:    []string{`metadata.annotations["stencil.dev/template-revision"]`},
		values:  [][2]string{{"r1", "r2"}},
	}, {
		name: "identical but for bookkeeping and status",
		old:  deployment("nginx:1.27", nil),
		new: deployment("nginx:1.27", func(d map[string]any) {
			md := d["metadata"].(map[string]any)
			md["resourceVersion"], md["generation"], md["uid"] = "8", int64(3), "u2"
			md["managedFields"] = []any{}
			md["annotations"] = map[string]any{"stencil.dev/applied-hash": "bbbb"}
			d["status"] = map[string]any{"readyReplicas": int64(0)}
		}),
	}, {
		name:   "image of a named container",
		old:    deployment("nginx:1.27", nil),
		new:    deployment("nginx:1.28", nil),
		want:   []string{"spec.template.spec.containers[name=web].image"},
		values: [][2]string{{"nginx:1.27", "nginx:1.28"}},
	}, {
		name: "containers reordered are matched by name, and the order reported",
		old:  deployment("nginx:1.27", nil),
		new: deployment("nginx:1.27", func(d map[string]any) {
			c := containers(d)
			c[0], c[1] = c[1], c[0]
		}),
		// The order is a change of its own: the pods roll.
		want:   []string{"spec.template.spec.containers"},
		values: [][2]string{{`["sidecar","web"]`, `["web","sidecar"]`}},
	}, {
		name: "an unnamed list is compared by index",
		old:  deployment("nginx:1.27", nil),
		new: deployment("nginx:1.27", func(d map[string]any) {
			containers(d)[1].(map[string]any)["args"] = []any{"-a", "-c", "-d"}
		}),
		want:   []string{"spec.template.spec.containers[name=web].args[1]", "spec.template.spec.containers[name=web].args[2]"},
		values: [][2]string{{"-b", "-c"}, {"<none>", "-d"}},
	}, {
		name: "added and removed fields, quoted keys",
		old:  deployment("nginx:1.27", nil),
		new: deployment("nginx:1.27", func(d map[string]any) {
			delete(spec(d), "replicas")
			d["metadata"].(map[string]any)["labels"] = map[string]any{"app": "web", "example.com/tier": "front"}
		}),
		want:   []string{`metadata.labels["example.com/tier"]`, "spec.replicas"},
		values: [][2]string{{"<none>", "front"}, {"2", "<none>"}},
	}, {
		name: "a container added is one change",
		old:  deployment("nginx:1.27", nil),
		new: deployment("nginx:1.27", func(d map[string]any) {
			c := spec(d)["template"].(map[string]any)["spec"].(map[string]any)
			c["containers"] = append(containers(d), map[string]any{"name": "log", "image": "busybox"})
		}),
		want:   []string{"spec.template.spec.containers[name=log]"},
		values: [][2]string{{"<none>", `{"image":"busybox","name":"log"}`}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			changes := objectChanges(tc.old, tc.new, !tc.stamped)
			var got []string
			var values [][2]string
			for _, c := range changes {
				got = append(got, c.Path)
				values = append(values, [2]string{formatValue(c.Old, c.HasOld), formatValue(c.New, c.HasNew)})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("paths = %q, want %q", got, tc.want)
			}
			if !reflect.DeepEqual(values, tc.values) {
				t.Errorf("values = %q, want %q", values, tc.values)
			}
		})
	}
}

func TestStatusChanges(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"url": "http://a", "phase": "Ready"},
	}}
	got := statusChanges(parent, map[string]any{"url": "http://b", "phase": "Ready"})
	if len(got) != 1 || got[0].String() != "status.url http://a -> http://b" {
		t.Errorf("statusChanges = %v", got)
	}
}

// imageUpdate is a child whose image changes.
func imageUpdate(ns, name, from, to string) childDiff {
	return childDiff{
		Parent: parentRef{Resource: "webapps", Namespace: ns, Name: name},
		Kind:   "Deployment", Namespace: ns, Name: name, Action: actionUpdate,
		Changes: []fieldChange{{Path: "spec.template.spec.containers[name=web].image", Old: from, New: to, HasOld: true, HasNew: true}},
	}
}

func sampleReport() *Report {
	return &Report{
		Children: []childDiff{
			imageUpdate("a", "w2", "nginx:1.27", "nginx:1.28"),
			{Parent: parentRef{"webapps", "a", "w1"}, Kind: "ConfigMap", Namespace: "a", Name: "w1-config", Action: actionPrune},
			imageUpdate("a", "w1", "nginx:1.27", "nginx:1.28"),
			imageUpdate("b", "w3", "nginx:1.26", "nginx:1.28"),
			{Parent: parentRef{"webapps", "b", "w4"}, Kind: "Service", Namespace: "b", Name: "w4", Action: actionCreate},
		},
		Unchanged: 7,
		Failures:  []failure{{Parent: parentRef{"webapps", "b", "g7"}, Reason: reasonRenderFailed, Message: "t.tmpl:12: spec.image must not be empty"}},
	}
}

func TestWriteTextGroupsIdenticalChanges(t *testing.T) {
	var out bytes.Buffer
	if err := WriteText(&out, sampleReport()); err != nil {
		t.Fatal(err)
	}
	want := `+ create 1 Service
    on b/w4
~ update 2 Deployments: spec.template.spec.containers[name=web].image nginx:1.27 -> nginx:1.28 (pods roll)
    on a/w1, a/w2
~ update 1 Deployment: spec.template.spec.containers[name=web].image nginx:1.26 -> nginx:1.28 (pods roll)
    on b/w3
- prune 1 ConfigMap
    on a/w1-config
b/g7: RenderFailed: t.tmpl:12: spec.image must not be empty
1 to create, 3 to update, 1 to prune, 7 unchanged, 1 render failures
`
	if out.String() != want {
		t.Errorf("text output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestGroupNamesAreBounded(t *testing.T) {
	var children []childDiff
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		children = append(children, imageUpdate("ns", n, "x:1", "x:2"))
	}
	var out bytes.Buffer
	if err := WriteText(&out, &Report{Children: children}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "~ update 12 Deployments: ") || !strings.Contains(out.String(), "ns/j and 2 more\n") {
		t.Errorf("text output:\n%s", out.String())
	}
}

func TestWriteJSONSchema(t *testing.T) {
	var out bytes.Buffer
	if err := WriteJSON(&out, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Children []struct {
			Parent map[string]string `json:"parent"`
			Kind   string            `json:"kind"`
			Name   string            `json:"name"`
			Action string            `json:"action"`
			Fields []string          `json:"fields"`
		} `json:"children"`
		Summary        map[string]int   `json:"summary"`
		RenderFailures []map[string]any `json:"renderFailures"`
		Waiting        []map[string]any `json:"waiting"`
		Held           []map[string]any `json:"held"`
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if len(got.Children) != 5 {
		t.Fatalf("children = %d, want 5", len(got.Children))
	}
	c := got.Children[0]
	if !reflect.DeepEqual(c.Parent, map[string]string{"resource": "webapps", "namespace": "a", "name": "w2"}) ||
		c.Kind != "Deployment" || c.Name != "w2" || c.Action != "update" ||
		!reflect.DeepEqual(c.Fields, []string{"spec.template.spec.containers[name=web].image"}) {
		t.Errorf("children[0] = %+v", c)
	}
	if got.Children[1].Fields == nil {
		t.Error(`a prune has "fields": null, want []`)
	}
	wantSummary := map[string]int{"create": 1, "update": 3, "prune": 1, "unchanged": 7, "renderFailed": 1, "applyFailed": 0, "waiting": 0, "held": 0, "paused": 0}
	if !reflect.DeepEqual(got.Summary, wantSummary) {
		t.Errorf("summary = %v, want %v", got.Summary, wantSummary)
	}
	if len(got.RenderFailures) != 1 || got.RenderFailures[0]["reason"] != "RenderFailed" {
		t.Errorf("renderFailures = %v", got.RenderFailures)
	}
}

func TestReportHasChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Report
		want bool
	}{
		{"nothing changes", &Report{Unchanged: 3}, false},
		{"a child changes", &Report{Children: []childDiff{imageUpdate("a", "b", "x:1", "x:2")}}, true},
		{"a render fails", &Report{Failures: []failure{{Reason: reasonRenderFailed}}}, true},
	} {
		if got := tc.r.HasChanges(); got != tc.want {
			t.Errorf("%s: HasChanges %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPodsRollOnlyOnAPodTemplateChange(t *testing.T) {
	replicas := childDiff{Parent: parentRef{"webapps", "a", "w1"}, Kind: "Deployment", Namespace: "a", Name: "w1", Action: actionUpdate,
		Changes: []fieldChange{{Path: "spec.replicas", Old: int64(1), New: int64(2), HasOld: true, HasNew: true}}}
	service := childDiff{Parent: parentRef{"webapps", "a", "w1"}, Kind: "Service", Namespace: "a", Name: "w1", Action: actionUpdate,
		Changes: []fieldChange{{Path: "spec.template.x", Old: "a", New: "b", HasOld: true, HasNew: true}}}
	var out bytes.Buffer
	if err := WriteText(&out, &Report{Children: []childDiff{replicas, service, imageUpdate("a", "w2", "x:1", "x:2")}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "(pods roll)"); got != 1 {
		t.Errorf("want (pods roll) on the image change alone, got %d in:\n%s", got, out.String())
	}
}
