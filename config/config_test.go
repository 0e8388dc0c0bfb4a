package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config/kinds"
)

const cfgPath = "testdata/stencil.yaml"

const validConfig = `
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [web/deployment.yaml.tmpl, web/service.yaml.tmpl]
    statusTemplate: web/status.yaml.tmpl
    namespaces: [team-a, team-b]
    selector: "tier in (web),!legacy"
  - version: v1
    resource: configmaps
    templates: [web/deployment.yaml.tmpl]
`

func TestParseConfigValid(t *testing.T) {
	cfg, err := ParseConfig(cfgPath, []byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != cfgPath || cfg.Dir != "testdata" {
		t.Errorf("Path, Dir = %q, %q", cfg.Path, cfg.Dir)
	}
	if len(cfg.Resources) != 2 {
		t.Fatalf("got %d resources, want 2", len(cfg.Resources))
	}
	r := cfg.Resources[0]
	if got, want := r.GVR(), (schema.GroupVersionResource{Group: "apps.example.com", Version: "v1beta1", Resource: "webapps"}); got != want {
		t.Errorf("GVR() = %v, want %v", got, want)
	}
	if r.String() != "webapps.v1beta1.apps.example.com" || cfg.Resources[1].String() != "configmaps.v1" {
		t.Errorf("String() = %q, %q", r.String(), cfg.Resources[1].String())
	}
	sel := r.LabelSelector()
	if !sel.Matches(labels.Set{"tier": "web"}) || sel.Matches(labels.Set{"tier": "web", "legacy": "y"}) {
		t.Errorf("LabelSelector() = %v does not behave as written", sel)
	}
	if !cfg.Resources[1].LabelSelector().Empty() {
		t.Errorf("empty selector should select everything")
	}
	if got := cfg.TemplatePath(r.Templates[0].Path); got != filepath.Join("testdata", "web", "deployment.yaml.tmpl") {
		t.Errorf("TemplatePath = %q", got)
	}
}

func TestRolloutLimits(t *testing.T) {
	cfg, err := ParseConfig(cfgPath, []byte("resources:"+entry+"    templates: [web/service.yaml.tmpl]\n    rollout: {maxInFlight: '25%', maxFailed: 2}\n"+
		strings.Replace(entry, "webapps", "gizmos", 1)+"    templates: [web/service.yaml.tmpl]\n    rollout: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		entry, total, inFlight, failed int
	}{
		{0, 20, 5, 2}, {0, 21, 6, 2}, {0, 1, 1, 2}, {0, 0, 1, 2}, {1, 20, 1, 1},
	} {
		r := cfg.Resources[tt.entry].Rollout
		if inFlight, failed := r.Limits(tt.total); inFlight != tt.inFlight || failed != tt.failed {
			t.Errorf("%s: Limits(%d) = %d, %d, want %d, %d", r, tt.total, inFlight, failed, tt.inFlight, tt.failed)
		}
	}
}

func TestLabelSelectorInvalidSelectsNothing(t *testing.T) {
	r := Resource{Selector: "a in (("}
	if r.LabelSelector().Matches(labels.Set{}) {
		t.Error("a bad selector must not match anything")
	}
}

func TestLoadExampleConfig(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "crds", "stencil.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Resources) != 4 || cfg.Resources[1].Resource != "memcacheds" || cfg.Resources[2].Templates[1].DependsOn[0] != "db" ||
		cfg.Resources[3].Chart != "charts/hello" || len(cfg.Resources[3].Children) != 0 {
		t.Errorf("unexpected resources %+v", cfg.Resources)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/nope.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

// entry is the start of a config entry whose first fields are fine.
const entry = `
  - group: apps.example.com
    version: v1beta1
    resource: webapps
`

func TestParseConfigErrors(t *testing.T) {
	const web = "testdata/stencil.yaml: resources[0] (webapps.v1beta1.apps.example.com): "
	tests := []struct {
		name   string
		config string
		want   []string // each must appear in the error, in this order, one per line
	}{
		{"empty file", ``, []string{"testdata/stencil.yaml: resources: at least one resource is required"}},
		{"not YAML", "resources: [", []string{"testdata/stencil.yaml: not valid YAML"}},
		{"top level list", "- a\n", []string{"testdata/stencil.yaml: top level must be a mapping"}},
		{"resources not list", "resources: {}\n", []string{"testdata/stencil.yaml: resources: must be a list, not a mapping"}},
		{"no resources", "resources: []\n", []string{"testdata/stencil.yaml: resources: at least one resource is required"}},
		{"unknown top-level field", "resource: []\nresources: [{version: v1, resource: pods, templates: [web/service.yaml.tmpl]}]\n",
			[]string{`testdata/stencil.yaml: resource: unknown field "resource"`}},
		{"duplicate key", "resources: []\nresources: []\n", []string{"testdata/stencil.yaml: not valid YAML", "already set"}},
		{"entry not mapping", "resources: [webapps]\n", []string{"testdata/stencil.yaml: resources[0]: must be a mapping, not a string"}},
		{"unknown fields, all reported", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    template: x\n    selectors: y\n",
			[]string{web + `selectors: unknown field "selectors"`, web + `template: unknown field "template"`}},
		{"wrong types", "resources:" + entry + "    templates: web/service.yaml.tmpl\n    namespaces: [1]\n    selector: [a]\n",
			[]string{web + "templates: must be a list of paths or {path, id, dependsOn, readyWhen} mappings, not a string", web + "namespaces[0]: must be a string, not a number", web + "selector: must be a string, not a list"}},
		{"missing version", "resources:\n  - group: apps.example.com\n    resource: webapps\n    templates: [web/service.yaml.tmpl]\n",
			[]string{"testdata/stencil.yaml: resources[0]: version: is required"}},
		{"missing resource", "resources:\n  - group: apps.example.com\n    version: v1\n    templates: [web/service.yaml.tmpl]\n",
			[]string{"testdata/stencil.yaml: resources[0]: resource: is required: the lowercase plural as in the CRD, e.g. webapps"}},
		{"kind instead of plural", "resources:\n  - group: apps.example.com\n    version: v1beta1\n    resource: WebApp\n    templates: [web/service.yaml.tmpl]\n",
			[]string{`testdata/stencil.yaml: resources[0] (WebApp.v1beta1.apps.example.com): resource: "WebApp": resource must be the lowercase plural as in the CRD, e.g. webapps`}},
		{"resource with subresource", "resources:\n  - version: v1\n    resource: pods/status\n    templates: [web/service.yaml.tmpl]\n",
			[]string{`testdata/stencil.yaml: resources[0] (pods/status.v1): resource: "pods/status": resource must be the lowercase plural`}},
		{"bad group", "resources:\n  - group: Apps_Example\n    version: v1\n    resource: webapps\n    templates: [web/service.yaml.tmpl]\n",
			[]string{`resources[0] (webapps.v1.Apps_Example): group: "Apps_Example" is not a valid API group`}},
		{"bad version", "resources:\n  - group: apps.example.com\n    version: V1.0\n    resource: webapps\n    templates: [web/service.yaml.tmpl]\n",
			[]string{`resources[0] (webapps.V1.0.apps.example.com): version: "V1.0" is not a valid API version`}},
		{"no templates", "resources:" + entry, []string{web + "templates: at least one template is required"}},
		{"missing template", "resources:" + entry + "    templates: [web/service.yaml.tmpl, web/deploy.yaml.tmpl]\n",
			[]string{web + "templates[1]: web/deploy.yaml.tmpl: no such file (looked for testdata/web/deploy.yaml.tmpl)"}},
		{"template is a directory", "resources:" + entry + "    templates: [adir.tmpl]\n",
			[]string{web + "templates[0]: adir.tmpl: testdata/adir.tmpl is not a regular file"}},
		{"empty template path", "resources:" + entry + "    templates: ['']\n", []string{web + "templates[0]: must not be empty"}},
		{"template listed twice", "resources:" + entry + "    templates: [web/service.yaml.tmpl, web/service.yaml.tmpl]\n",
			[]string{web + "templates[1]: web/service.yaml.tmpl: duplicate of templates[0]"}},
		{"missing status template", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    statusTemplate: web/gone.tmpl\n",
			[]string{web + "statusTemplate: web/gone.tmpl: no such file"}},
		{"duplicate GVR", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n" + entry + "    templates: [web/deployment.yaml.tmpl]\n",
			[]string{"testdata/stencil.yaml: resources[1] (webapps.v1beta1.apps.example.com): version: webapps.apps.example.com is already configured by resources[0] (v1beta1)"}},
		{"one GroupResource at two versions", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n" +
			strings.Replace(entry, "v1beta1", "v1", 1) + "    templates: [web/deployment.yaml.tmpl]\n",
			[]string{"testdata/stencil.yaml: resources[1] (webapps.v1.apps.example.com): version: webapps.apps.example.com is already configured by resources[0] (v1beta1): one entry per group and resource"}},
		{"bad selector", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    selector: 'a in (('\n",
			[]string{web + `selector: "a in ((": `}},
		{"bad namespace", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    namespaces: [Team_A]\n",
			[]string{web + `namespaces[0]: "Team_A" is not a valid namespace name`}},
		{"duplicate namespace", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    namespaces: [a, b, a]\n",
			[]string{web + `namespaces[2]: "a": duplicate of namespaces[0]`}},
		{"bad rollout", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    rollout: {maxInFlight: 0, maxFailed: '150%', maxInflight: 2}\n",
			[]string{web + `rollout.maxInflight: unknown field "maxInflight" (known: maxInFlight, maxFailed)`,
				web + "rollout.maxInFlight: 0: must be a whole number of at least 1",
				web + `rollout.maxFailed: "150%": must be a percentage from 1% to 100%`}},
		{"bad renderBudget", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    renderBudget: {steps: 0, listItems: big, includeDepth: 5000, stepz: 1}\n",
			[]string{web + `renderBudget.stepz: unknown field "stepz" (known: steps, stringBytes, listItems, includeDepth, timeoutSeconds, memoryMiB, resultNodes)`,
				web + "renderBudget.listItems: must be a whole number, not a string",
				web + "renderBudget.steps: 0: must be a whole number from 1 to 500000000",
				web + "renderBudget.includeDepth: 5000: must be a whole number from 1 to 1000"}},
		{"rollout not a mapping", "resources:" + entry + "    templates: [web/service.yaml.tmpl]\n    rollout: 3\n",
			[]string{web + "rollout: must be a mapping with maxInFlight and maxFailed, not a number"}},
		{"decode and validation errors together, grouped by entry",
			"resources:\n  - version: v1\n    resource: Pods\n    templates: [gone.tmpl]\n    extra: 1\n  - version: v1\n    resource: pods\n    templates: 5\n",
			[]string{`resources[0] (Pods.v1): extra: unknown field "extra"`,
				`resources[0] (Pods.v1): resource: "Pods": resource must be the lowercase plural`,
				"resources[0] (Pods.v1): templates[0]: gone.tmpl: no such file",
				"resources[1] (pods.v1): templates: must be a list of paths or {path, id, dependsOn, readyWhen} mappings, not a number"}},
		{"every entry reported", "resources:\n  - version: v1\n    resource: pods\n  - version: v1\n    resource: Services\n    templates: [x]\n",
			[]string{"resources[0] (pods.v1): templates: at least one template is required",
				`resources[1] (Services.v1): resource: "Services": resource must be the lowercase plural`,
				"resources[1] (Services.v1): templates[0]: x: no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(cfgPath, []byte(tt.config))
			if err == nil {
				t.Fatalf("no error, config %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("config %+v returned with an error", cfg)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				if i < len(lines) && !strings.Contains(lines[i], want) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, lines[i], want)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("errors.As(*FieldError) failed for %v", err)
			} else if fe.File != cfgPath {
				t.Errorf("FieldError.File = %q", fe.File)
			}
		})
	}
}

func TestMissingTemplateIsNotExist(t *testing.T) {
	_, err := ParseConfig(cfgPath, []byte("resources:"+entry+"    templates: [gone.tmpl]\n"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist) = false for %v", err)
	}
}

func TestLoadAbsoluteTemplatePath(t *testing.T) {
	abs, err := filepath.Abs("testdata/web/service.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "stencil.yaml")
	if err := os.WriteFile(path, []byte("resources:"+entry+"    templates: ["+abs+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.TemplatePath(cfg.Resources[0].Templates[0].Path); got != abs {
		t.Errorf("TemplatePath = %q, want %q", got, abs)
	}
}

func TestChildrenChecks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.tmpl"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	const head = "resources:\n  - group: apps.example.com\n    version: v1\n    resource: webapps\n    templates: [t.tmpl]\n"
	tests := []struct {
		name, children string
		want           []string // error substrings; none: valid
		warnings       int
	}{
		{"absent: Deployment and Service", "", nil, 0},
		{"opt-in kinds", "    children:\n      - {apiVersion: v1, kind: ConfigMap}\n      - {apiVersion: policy/v1, kind: PodDisruptionBudget}\n", nil, 0},
		{"cluster-scoped", "    children:\n      - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole}\n",
			[]string{"resources[0] (webapps.v1.apps.example.com): children[0]: ClusterRole.rbac.authorization.k8s.io is cluster-scoped"}, 0},
		{"namespace", "    children:\n      - {apiVersion: v1, kind: Namespace}\n", []string{"children[0]: Namespace is cluster-scoped"}, 0},
		{"RoleBinding refused", "    children:\n      - {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}\n",
			[]string{"children[0]: RoleBinding.rbac.authorization.k8s.io grants permissions", "allowPermissionGrants: true"}, 0},
		{"RoleBinding allowed explicitly, with a warning", "    allowPermissionGrants: true\n    children:\n      - {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}\n", nil, 1},
		{"unknown field", "    children:\n      - {apiVersion: v1, kind: ConfigMap, plural: configmaps}\n", []string{`children[0].plural: unknown field "plural"`}, 0},
		{"missing kind", "    children:\n      - {apiVersion: v1}\n", []string{"children[0]: apiVersion and kind are required"}, 0},
		{"duplicate", "    children:\n      - {apiVersion: v1, kind: ConfigMap}\n      - {apiVersion: v1, kind: ConfigMap}\n", []string{"children[1]: ConfigMap is also children[0]"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "stencil.yaml")
			if err := os.WriteFile(path, []byte(head+tt.children), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				// package entry words the warnings (entry_test.go).
				grants := 0
				for _, k := range cfg.Resources[0].Children {
					if kinds.GrantsPermissions(k.GVK().GroupKind()) {
						grants++
					}
				}
				if grants != tt.warnings {
					t.Errorf("%d kinds that grant permissions, want %d", grants, tt.warnings)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded, want errors %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
