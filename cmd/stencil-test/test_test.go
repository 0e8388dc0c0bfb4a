package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// gadgetTestConfig is a team's config for the stencil test tests: a
// Gadget API (generated CRD), a database template and an app that waits
// for it, and a status template.
const gadgetTestConfig = `resources:
  - group: gen.example.com
    version: v1
    resource: gadgets
    kind: Gadget
    schema:
      spec:
        image: string | required=true minLength=1
        replicas: integer | default=1 minimum=0 maximum=5
        debug: boolean
      status:
        endpoint: string
    templates:
      - {path: db.yaml.tmpl, id: db}
      - {path: app.yaml.tmpl, id: app, dependsOn: [db]}
    statusTemplate: status.yaml.tmpl
    children:
      - {apiVersion: apps/v1, kind: Deployment}
      - {apiVersion: v1, kind: Service}
`

const gadgetDB = `apiVersion: v1
kind: Service
metadata:
  name: {{ printf "%s-db" .Name | quote }}
spec:
  ports: [{port: 5432}]
`

const gadgetApp = `{{- $db := observed "Service" (printf "%s-db" .Name) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name | quote }}
spec:
  replicas: {{ get .Spec "replicas" 1 | int64 }}
  selector: {matchLabels: {app: {{ .Name | quote }}}}
  template:
    metadata:
      labels: {app: {{ .Name | quote }}}
    spec:
      containers:
        - name: app
          image: {{ .Spec.image | quote }}
          {{- if get .Spec "debug" false }}
          args: [--debug]
          {{- else }}
          args: [--quiet]
          {{- end }}
          env:
            - {name: DB_HOST, value: {{ $db.spec.clusterIP | quote }}}
`

const gadgetStatus = `{{- $db := observed "Service" (printf "%s-db" .Name) -}}
endpoint: {{ printf "%s:5432" $db.spec.clusterIP | quote }}
`

const gadgetResource = `apiVersion: gen.example.com/v1
kind: Gadget
metadata: {name: g, namespace: team-a}
spec: {image: registry.k8s.io/pause:3.10, replicas: 2}
`

const gadgetDBLive = `apiVersion: v1
kind: Service
metadata: {name: g-db, namespace: team-a}
spec: {clusterIP: 10.0.0.7, ports: [{port: 5432}]}
`

// writeGadgetConfig writes the config, its templates and the given test
// files (name -> text, under tests/); it returns the config's path.
func writeGadgetConfig(t testing.TB, tests map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"stencil.yaml": gadgetTestConfig, "db.yaml.tmpl": gadgetDB, "app.yaml.tmpl": gadgetApp, "status.yaml.tmpl": gadgetStatus,
		"tests/objects/gadget.yaml": gadgetResource, "tests/objects/db-live.yaml": gadgetDBLive,
	}
	for name, text := range tests {
		files[filepath.Join("tests", name)] = text
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "stencil.yaml")
}

// TestStencilTestExamples: the project's own examples pass their tests
// (crds/tests, and crds/reads/tests of the reads example), as make test
// runs them.
func TestStencilTestExamples(t *testing.T) {
	for _, config := range []string{exampleConfig, filepath.Join("..", "..", "crds", "reads", "stencil.yaml")} {
		r := stencil(t, "", "test", "--config", config)
		if r.code != 0 || !strings.Contains(r.stdout, " passed, 0 failed") {
			t.Fatalf("stencil test --config %s: exit %d\n%s%s", config, r.code, r.stdout, r.stderr)
		}
		t.Logf("%s", r.stdout)
	}
}

// TestStencilTestCases: each kind of case, passing and failing, and the
// exit status and output of each.
func TestStencilTestCases(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"gadget.yaml": `cases:
  - name: waits for its database
    resource: objects/gadget.yaml
    assert:
      - "objects.size() == 1 && objects[0].kind == 'Service'"
      - "waits.exists(w, w.contains('Service/g-db, which does not exist'))"
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'WaitingForDependency')"
  - name: the app reads the database's address
    resource: objects/gadget.yaml
    observed: [objects/db-live.yaml]
    golden: golden/app.yaml
    assert:
      - "objects.exists(o, o.kind == 'Deployment' && o.spec.template.spec.containers[0].env[0].value == '10.0.0.7')"
      - expr: "status.endpoint == '10.0.0.7:5432'"
        message: the status template reports the database
  - name: a tenant's mistake is refused by the CRD
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: bad}, spec: {image: x, replicas: 9}}
    error: spec.replicas in body should be less than or equal to 5
`})
	r := stencil(t, "", "test", "--config", path, "--update")
	if r.code != 0 || !strings.Contains(r.stdout, "3 passed, 0 failed, 1 golden files updated") {
		t.Fatalf("--update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	golden := filepath.Join(filepath.Dir(path), "tests", "golden", "app.yaml")
	data, err := os.ReadFile(golden)
	if err != nil || !strings.Contains(string(data), "value: 10.0.0.7") || !strings.Contains(string(data), "endpoint: 10.0.0.7:5432") {
		t.Fatalf("the golden file --update wrote: %v\n%s", err, data)
	}
	stencil(t, "", "test", "--config", path).expect(t, 0, []string{"PASS " + filepath.Join(filepath.Dir(path), "tests", "gadget.yaml") + ": waits for its database", "3 passed, 0 failed"}, nil)

	// A template change the golden file does not have: a unified diff.
	app := filepath.Join(filepath.Dir(path), "app.yaml.tmpl")
	if err := os.WriteFile(app, []byte(strings.Replace(gadgetApp, "--quiet", "--silent", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stencil(t, "", "test", "--config", path).expect(t, 1, []string{
		"FAIL ", "the app reads the database's address", "the render differs from",
		"@@ Deployment team-a/g .spec.template.spec.containers[0].args[0] @@ -44,7 +44,7\n", "-          - --quiet", "+          - --silent", "2 passed, 1 failed",
	}, nil)
	if err := os.WriteFile(app, []byte(gadgetApp), 0o644); err != nil {
		t.Fatal(err)
	}

	// -run picks cases by file: name.
	stencil(t, "", "test", "--config", path, "-run", "refused").expect(t, 0, []string{"1 passed, 0 failed, 2 skipped (-run)"}, nil)
}

// TestStencilTestFailures: a failed assertion prints what it saw; an
// expected error that does not come, a schema typo in a template, a test
// resource the CRD refuses, a render that differs between two renders.
func TestStencilTestFailures(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"fail.yaml": `cases:
  - name: wrong replicas
    resource: objects/gadget.yaml
    observed: [objects/db-live.yaml]
    assert:
      - "objects.filter(o, o.kind == 'Deployment')[0].spec.replicas == 3"
  - name: no error comes
    resource: objects/gadget.yaml
    error: render budget
  - name: refused by the CRD
    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: bad}, spec: {image: x, colour: red}}
    assert: ["true"]
`})
	stencil(t, "", "test", "--config", path).expect(t, 1, []string{
		"FAIL ", "wrong replicas", "got false", "objects.filter(o, o.kind == \"Deployment\")[0].spec.replicas = 2",
		"looked at:\n            Deployment team-a/g: .kind = \"Deployment\", .spec.replicas = 2\n            only the kind or name of: Service team-a/g-db\n",
		"no error comes", `want a render that fails with "render budget"; it rendered 1 children`,
		"refused by the CRD", "the resource is refused by its entry's CRD: spec.colour: not in the schema",
		"0 passed, 3 failed",
	}, nil)

	// A typo in a template: the API server would drop replica silently.
	app := filepath.Join(filepath.Dir(path), "app.yaml.tmpl")
	if err := os.WriteFile(app, []byte(strings.Replace(gadgetApp, "  replicas:", "  replica:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(filepath.Dir(path), "tests", "typo.yaml")
	if err := os.WriteFile(typo, []byte("cases:\n  - name: typo\n    resource: objects/gadget.yaml\n    observed: [objects/db-live.yaml]\n    assert: [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stencil(t, "", "test", "--config", path, typo).expect(t, 1, []string{"FAIL ", "Deployment g: .spec.replica: field not declared in schema"}, nil)
}

// TestStencilTestInvalidFiles: a test file stencil cannot run exits 2,
// naming the file and the field.
func TestStencilTestInvalidFiles(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"unknown field", "cases:\n  - name: a\n    resource: objects/gadget.yaml\n    golde: x.yaml\n", `cases[0]: json: unknown field "golde"`},
		{"checks nothing", "cases:\n  - name: a\n    resource: objects/gadget.yaml\n", "cases[0] (a): checks nothing"},
		{"assertion does not compile", "cases:\n  - name: a\n    resource: objects/gadget.yaml\n    assert: [\"objects.size( ==\"]\n", "cases[0] (a).assert[0]"},
		{"not a bool", "cases:\n  - name: a\n    resource: objects/gadget.yaml\n    assert: [\"objects.size()\"]\n", "want a bool"},
		{"duplicate name", "cases:\n  - {name: a, resource: objects/gadget.yaml, assert: [\"true\"]}\n  - {name: a, resource: objects/gadget.yaml, assert: [\"true\"]}\n", `cases[1].name: "a" is also cases[0]'s name`},
		{"missing resource file", "cases:\n  - {name: a, resource: objects/nope.yaml, assert: [\"true\"]}\n", "cases[0] (a).resource: open"},
		{"observed kind no entry renders", "cases:\n  - name: a\n    resource: objects/gadget.yaml\n    observed: [{apiVersion: batch/v1, kind: CronJob, metadata: {name: g}}]\n    assert: [\"true\"]\n", "cases[0] (a).observed[0]: CronJob g: no entry renders a batch/v1, Kind=CronJob"},
		{"no entry serves it", "cases:\n  - {name: a, resource: {apiVersion: x.example.com/v1, kind: X, metadata: {name: x}}, assert: [\"true\"]}\n", "lists no resource of x.example.com/v1"},
	} {
		path := writeGadgetConfig(t, map[string]string{"bad.yaml": c.text})
		r := stencil(t, "", "test", "--config", path)
		if r.code != 2 || !strings.Contains(r.stderr, filepath.Join(filepath.Dir(path), "tests", "bad.yaml")) || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want 2 and an error naming the file and %q:\n%s%s", c.name, r.code, c.want, r.stdout, r.stderr)
		}
	}
}

// TestStencilTestJUnit: --junit writes JUnit XML a CI system reads: a
// suite per file, a case per case, failures with their text.
func TestStencilTestJUnit(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"a.yaml": `cases:
  - {name: passes, resource: objects/gadget.yaml, assert: ["objects.size() == 1"]}
  - {name: fails, resource: objects/gadget.yaml, assert: ["objects.size() == 2"]}
`})
	junit := filepath.Join(t.TempDir(), "junit.xml")
	stencil(t, "", "test", "--config", path, "--junit", junit).expect(t, 1, []string{"1 passed, 1 failed"}, nil)
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the JUnit file does not parse: %v\n%s", err, data)
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 ||
		doc.Suites[0].Cases[0].Failure != nil || doc.Suites[0].Cases[1].Failure == nil ||
		!strings.Contains(doc.Suites[0].Cases[1].Failure.Text, "objects.size() = 1") {
		t.Errorf("JUnit:\n%s", data)
	}
}

// TestStencilTestThousandCases: 1,000 generated cases, each rendered
// twice through the render wall, and the time they take (the target is
// under 10 s on 2 cores; make bench's BenchmarkStencilTest measures it).
func TestStencilTestThousandCases(t *testing.T) {
	n := 1000
	if raceEnabled {
		n = 200
	}
	path := writeGadgetConfig(t, map[string]string{"many.yaml": thousandCases(n)})
	start := time.Now()
	r := stencil(t, "", "test", "--config", path)
	took := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d passed, 0 failed", n)) {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("%d cases (%d renders, race detector %v): %s, %s per case", n, 2*n, raceEnabled, took.Round(time.Millisecond), (took / time.Duration(n)).Round(time.Microsecond))
}

// thousandCases is a test file of n cases, each its own Gadget.
func thousandCases(n int) string {
	var b strings.Builder
	b.WriteString("cases:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: gadget %d\n    resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g%d, namespace: team-a}, spec: {image: img:%d, replicas: %d}}\n", i, i, i, i%5)
		fmt.Fprintf(&b, "    observed: [{apiVersion: v1, kind: Service, metadata: {name: g%d-db}, spec: {clusterIP: 10.0.0.7}}]\n", i)
		fmt.Fprintf(&b, "    assert: [\"objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == %d)\"]\n", i%5)
	}
	return b.String()
}

// BenchmarkStencilTest runs 1,000 generated cases per iteration.
func BenchmarkStencilTest(b *testing.B) {
	path := writeGadgetConfig(b, map[string]string{"many.yaml": thousandCases(1000)})
	var stdout, stderr strings.Builder
	for b.Loop() {
		stdout.Reset()
		if code := testCommand(context.Background(), []string{"--config", path}, &stdout, &stderr); code != 0 {
			b.Fatalf("exit %d: %s", code, stderr.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/1000-cases")
}

// TestStencilTestCoverage: --coverage lists each template's branches not
// taken; --min-coverage fails under its threshold.
func TestStencilTestCoverage(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"a.yaml": `cases:
  - {name: quiet, resource: objects/gadget.yaml, observed: [objects/db-live.yaml], assert: ["objects.size() == 2"]}
`})
	r := stencil(t, "", "test", "--config", path, "--coverage")
	r.expect(t, 0, []string{"coverage: 1 of 2 template branches taken (50.0%)", "app.yaml.tmpl: 1 of 2 (50.0%)", "not taken: app.yaml.tmpl:16: if"}, nil)
	stencil(t, "", "test", "--config", path, "--min-coverage", "60").expect(t, 1, []string{"coverage 50.0% is under --min-coverage 60%"}, nil)
	stencil(t, "", "test", "--config", path, "--min-coverage", "50").expect(t, 0, []string{"(50.0%)"}, nil)

	// A case with debug takes the other branch.
	more := filepath.Join(filepath.Dir(path), "tests", "b.yaml")
	if err := os.WriteFile(more, []byte(`cases:
  - {name: debug, resource: {apiVersion: gen.example.com/v1, kind: Gadget, metadata: {name: g, namespace: team-a}, spec: {image: x, debug: true}}, observed: [objects/db-live.yaml], assert: ["objects[1].spec.template.spec.containers[0].args == ['--debug']"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	stencil(t, "", "test", "--config", path, "--min-coverage", "100").expect(t, 0, []string{"coverage: 2 of 2 template branches taken (100.0%)"}, nil)
}

// TestStencilTestCostLimit: an assertion of 10^9 steps (a comprehension
// three deep over a thousand numbers) fails its case at its cost limit
// within a second or two, naming itself and the limit, and the other
// cases still run; a file's costLimit lowers the limit for its cases.
func TestStencilTestCostLimit(t *testing.T) {
	nums := make([]string, 1000)
	for i := range nums {
		nums[i] = fmt.Sprint(i)
	}
	l := "[" + strings.Join(nums, ",") + "]"
	loop := l + ".all(i, " + l + ".all(j, " + l + ".all(k, i + j + k >= 0)))"
	path := writeGadgetConfig(t, map[string]string{"loop.yaml": `cases:
  - name: loops
    resource: objects/gadget.yaml
    assert: ["` + loop + `"]
  - name: passes
    resource: objects/gadget.yaml
    assert: ["objects.size() == 1"]
`, "low.yaml": `costLimit: 3
cases:
  - name: a realistic assertion under a limit of 3
    resource: objects/gadget.yaml
    assert: ["objects.exists(o, o.kind == 'Service' && o.metadata.name == 'g-db')"]
`})
	start := time.Now()
	r := stencil(t, "", "test", "--config", path)
	took := time.Since(start)
	r.expect(t, 1, []string{
		"FAIL " + filepath.Join(filepath.Dir(path), "tests", "loop.yaml") + ": loops", "    assert [0,1,2,3,",
		"...: stopped at its cost limit of 1000000 (the case's or file's costLimit raises it; docs/testing-configs.md)",
		"PASS " + filepath.Join(filepath.Dir(path), "tests", "loop.yaml") + ": passes",
		"a realistic assertion under a limit of 3", "assert objects.exists(o, o.kind == 'Service' && o.metadata.name == 'g-db'): stopped at its cost limit of 3 (",
		"1 passed, 2 failed",
	}, nil)
	t.Logf("3 cases, one of 10^9 steps: %s", took.Round(time.Millisecond))
	if took > 3*time.Second && !raceEnabled {
		t.Errorf("took %s, want a second or two (and the renders)", took)
	}
}

// TestStencilTestGoldenOutside: a golden or fixture path that leaves the
// test file's and the config's directories, as written or through a
// symlink, is an invalid test file: exit 2 naming the file and the
// field, and --update writes nothing, not even the other cases' goldens.
func TestStencilTestGoldenOutside(t *testing.T) {
	for _, c := range []struct{ name, field, value string }{
		{"up two levels", "golden", "../../escaped-golden.yaml"},
		{"a symlinked directory", "golden", "out/escaped-golden.yaml"},
		{"a fixture", "observed", "[../../escaped-fixture.yaml]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeGadgetConfig(t, map[string]string{"a.yaml": `cases:
  - {name: fine, resource: objects/gadget.yaml, golden: golden/fine.yaml}
  - {name: escapes, resource: objects/gadget.yaml, assert: ["true"], ` + c.field + `: ` + c.value + `}
`})
			cfg := filepath.Dir(path)
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(cfg, "tests", "out")); err != nil {
				t.Fatal(err)
			}
			before := listFiles(t, filepath.Dir(cfg))
			r := stencil(t, "", "test", "--config", path, "--update")
			file := filepath.Join(cfg, "tests", "a.yaml")
			if r.code != 2 || !strings.Contains(r.stderr, file+": cases[1] (escapes)."+c.field) || !strings.Contains(r.stderr, "outside the test file's directory") {
				t.Errorf("exit %d, want 2 naming %s and the field %s:\n%s%s", r.code, file, c.field, r.stdout, r.stderr)
			}
			if after := listFiles(t, filepath.Dir(cfg)); !slices.Equal(before, after) {
				t.Errorf("--update wrote files: before %v, after %v", before, after)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("--update wrote through the symlink: %v", ents)
			}
		})
	}
}

// listFiles lists every file under dir.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStencilTestChartCoverage: --coverage lists a chart entry's branches
// as it lists own templates', by the chart's file and line (as Helm names
// the file); a case that switches the ConfigMap off takes the else of its
// if.
func TestStencilTestChartCoverage(t *testing.T) {
	chart, err := filepath.Abs(filepath.Join("..", "..", "crds", "charts", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "stencil.yaml")
	files := map[string]string{
		path: "resources:\n  - group: charts.example.com\n    version: v1\n    resource: hellos\n    chart: " + chart + "\n",
		filepath.Join(dir, "tests", "a.yaml"): `cases:
  - {name: defaults, resource: {apiVersion: charts.example.com/v1, kind: Hello, metadata: {name: h, namespace: team-a}, spec: {}}, assert: ["objects.exists(o, o.kind == 'ConfigMap')"]}
`,
	}
	for p, text := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := stencil(t, "", "test", "--config", path, "--coverage")
	r.expect(t, 0, []string{"coverage: 6 of 12 template branches taken (50.0%)", "hello/templates/configmap.yaml: 2 of 4 (50.0%)", "not taken: hello/templates/configmap.yaml:1: else of if",
		"hello/templates/deployment.yaml: ", "not taken: hello/templates/deployment.yaml:20: with"}, nil)
	if strings.Contains(r.stdout, "hello/templates/configmap.yaml:1: if\n") {
		t.Errorf("the taken if is listed as not taken:\n%s", r.stdout)
	}

	off := filepath.Join(dir, "tests", "b.yaml")
	if err := os.WriteFile(off, []byte(`cases:
  - {name: no config, resource: {apiVersion: charts.example.com/v1, kind: Hello, metadata: {name: h, namespace: team-a}, spec: {config: {enabled: false}}}, assert: ["!objects.exists(o, o.kind == 'ConfigMap')"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = stencil(t, "", "test", "--config", path, "--coverage")
	r.expect(t, 0, []string{"hello/templates/configmap.yaml: 3 of 4 (75.0%)", "not taken: hello/templates/configmap.yaml:10: with"}, nil)
	if strings.Contains(r.stdout, "hello/templates/configmap.yaml:1: else of if") {
		t.Errorf("the else taken by the second case is listed as not taken:\n%s", r.stdout)
	}
}
