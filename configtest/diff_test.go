package configtest

import (
	"strings"
	"testing"
)

// twoDeployments is a golden document of two Deployments, the second
// one's image at 1.9, and a status.
const twoDeployments = `children:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: wren-finch
    namespace: aviary
  spec:
    template:
      spec:
        containers:
        - image: registry.example/finch:1.9
          name: app
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: wren-perch
    namespace: aviary
  spec:
    template:
      spec:
        containers:
        - image: registry.example/perch:1.9
          name: app
status:
  phase: Ready
  replicas: 2
`

// TestGoldenDiffNamesObjectAndField: each hunk is headed by the object
// its first change is in and the field path of that change; changes in
// two objects close together make two hunks, not one.
func TestGoldenDiffNamesObjectAndField(t *testing.T) {
	for _, c := range []struct {
		name, got string
		want      []string
		hunks     int
	}{
		{
			"one image", strings.Replace(twoDeployments, "perch:1.9", "perch:2.1", 1),
			[]string{"@@ Deployment aviary/wren-perch .spec.template.spec.containers[0].image @@ -19,7 +19,7\n", "-        - image: registry.example/perch:1.9\n+        - image: registry.example/perch:2.1\n"},
			1,
		},
		{
			"the status", strings.Replace(twoDeployments, "phase: Ready", "phase: Progressing", 1),
			[]string{"@@ Gadget team-a/g .status.phase @@ -22,5 +22,5\n"},
			1,
		},
		{
			"a field added", strings.Replace(twoDeployments, "          name: app\n- apiVersion", "          name: app\n          tty: true\n- apiVersion", 1),
			[]string{"@@ Deployment aviary/wren-finch .spec.template.spec.containers[0].tty @@ -10,6 +10,7\n", "+          tty: true\n"},
			1,
		},
		{
			// The last line of one object and the third of the next: one
			// hunk of diff -u, two here, each named.
			"two objects close together",
			strings.Replace(strings.Replace(twoDeployments, "name: wren-perch", "name: wren-perch2", 1), "finch:1.9\n          name: app", "finch:1.9\n          name: main", 1),
			[]string{"@@ Deployment aviary/wren-finch .spec.template.spec.containers[0].name @@ -9,4 +9,4\n", "@@ Deployment aviary/wren-perch .metadata.name @@ -13,7 +13,7\n"},
			2,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := goldenDiff("golden.yaml", "render", twoDeployments, c.got, "Gadget team-a/g")
			for _, w := range c.want {
				if !strings.Contains(d, w) {
					t.Errorf("the diff lacks %q:\n%s", w, d)
				}
			}
			if n := strings.Count(d, "\n@@ "); n != c.hunks {
				t.Errorf("%d hunks, want %d:\n%s", n, c.hunks, d)
			}
		})
	}
}

// TestGoldenDiffOfAHandEditedGolden: a golden file that no longer
// parses still diffs, its hunks placed by the render's lines.
func TestGoldenDiffOfAHandEditedGolden(t *testing.T) {
	bad := strings.Replace(twoDeployments, "perch:1.9", "perch:1.9\n  : [", 1)
	d := goldenDiff("golden.yaml", "render", bad, twoDeployments, "Gadget team-a/g")
	if !strings.Contains(d, "-  : [") || !strings.Contains(d, "@@ ") {
		t.Errorf("diff:\n%s", d)
	}
}
