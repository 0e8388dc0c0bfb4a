package crd

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"stencil.dev/stencil/contract"
)

// webapp is the design's example entry.
func webapp(t *testing.T) Definition {
	t.Helper()
	spec, errs := Simple(mustYAML(t, `
image: string | required=true maxLength=255 pattern="^[^\\s]+$"
replicas: integer | default=2 minimum=0 maximum=20
port: integer | default=8080 minimum=1 maximum=65535
env: "map[string]string | maxProperties=50"
hosts: "[]string | maxItems=100"
`), field.NewPath("schema", "spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	status, _ := Simple(map[string]any{"endpoint": "string"}, field.NewPath("schema", "status"))
	return Definition{
		Group: "apps.example.com", Version: "v1beta1", Plural: "webapps", Kind: "WebApp",
		ShortNames: []string{"wa"}, Categories: []string{"all"},
		Spec: spec, Status: status,
		Rules:   []Rule{{Rule: "self.replicas <= 3 || self.image.startsWith('registry.internal/')", Message: "more than 3 replicas need an internal image"}},
		Columns: []Column{{Name: "Image", JSONPath: ".spec.image", Type: "string"}},
	}
}

func TestBuild(t *testing.T) {
	crd, errs := Build(webapp(t), field.NewPath("entries").Index(0).Child("schema"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if crd.Name != "webapps.apps.example.com" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("name %q scope %q", crd.Name, crd.Spec.Scope)
	}
	n := crd.Spec.Names
	if n.Singular != "webapp" || n.ListKind != "WebAppList" || n.ShortNames[0] != "wa" || n.Categories[0] != "all" {
		t.Errorf("names = %+v", n)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1beta1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version = %+v", v)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath)
	}
	want := `Ready=.status.conditions[?(@.type=="Ready")].status Reason=.status.conditions[?(@.type=="Ready")].reason Image=.spec.image Age=.metadata.creationTimestamp`
	if got := strings.Join(cols, " "); got != want {
		t.Errorf("columns\n got %s\nwant %s", got, want)
	}
	root := v.Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	if len(spec.XValidations) != 1 || spec.XValidations[0].Message == "" || spec.XPreserveUnknownFields != nil {
		t.Errorf("spec rules = %+v, preserve = %v", spec.XValidations, spec.XPreserveUnknownFields)
	}
	if strings.Join(root.Required, ",") != "spec" {
		t.Errorf("root required = %v", root.Required)
	}
}

func TestBuildStatus(t *testing.T) {
	crd, errs := Build(webapp(t), field.NewPath("schema"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	for _, name := range append([]string{"endpoint", contract.StatusDeployedRelease}, contract.ReservedStatusFields...) {
		if _, ok := status.Properties[name]; !ok {
			t.Errorf("status has no %s", name)
		}
	}
	conds := status.Properties["conditions"]
	if *conds.XListType != "map" || strings.Join(conds.XListMapKeys, ",") != "type" ||
		strings.Join(conds.Items.Schema.Required, ",") != "type,status" ||
		conds.Items.Schema.Properties["lastTransitionTime"].Format != "date-time" {
		t.Errorf("conditions = %s", toJSON(t, conds))
	}
	for name, typ := range map[string]string{"observedGeneration": "integer", "phase": "string", "replicas": "integer", "readyReplicas": "integer", contract.StatusTemplateRevision: "string", contract.StatusDeployedRelease: "object"} {
		if got := status.Properties[name].Type; got != typ {
			t.Errorf("status.%s type = %q, want %q", name, got, typ)
		}
	}
}

func TestBuildStatusCollision(t *testing.T) {
	for _, name := range []string{"phase", contract.StatusDeployedRelease} {
		d := webapp(t)
		d.Status.Properties[name] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		_, errs := Build(d, field.NewPath("schema"))
		if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), "schema.status."+name) || !strings.Contains(got.Error(), "stencil writes itself") {
			t.Errorf("%s: errors = %v", name, got)
		}
	}
}

func TestBuildRefused(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Definition)
		want   []string
	}{
		// CEL rules are compiled by the API server (check.go):
		// test/integration's TestValidateServer.
		{"printer column path", func(d *Definition) { d.Columns[0].JSONPath = "spec.image[" },
			[]string{"schema.printerColumns[0]"}},
		{"printer column type", func(d *Definition) { d.Columns[0].Type = "colour" },
			[]string{"schema.printerColumns[0].type"}},
		{"not structural", func(d *Definition) {
			d.Spec.Properties["free"] = apiextensionsv1.JSONSchemaProps{Description: "no type"}
		}, []string{"schema.spec.free.type", "must not be empty for specified object fields"}},
		{"default does not validate", func(d *Definition) {
			s := d.Spec.Properties["replicas"]
			s.Default = rawJSON(99)
			d.Spec.Properties["replicas"] = s
		}, []string{"schema.spec.replicas.default", "less than or equal to 20"}},
		{"bad kind", func(d *Definition) { d.Kind = "web app" }, []string{"schema", "spec.names.kind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webapp(t)
			tt.change(&d)
			_, errs := Build(d, field.NewPath("schema"))
			got := errs.ToAggregate()
			if got == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("error %q does not contain %q", got, w)
				}
			}
		})
	}
}

func TestBuildPreserveUnknownFields(t *testing.T) {
	d := webapp(t)
	d.PreserveUnknownFields = true
	crd, errs := Build(d, field.NewPath("schema"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].XPreserveUnknownFields; p == nil || !*p {
		t.Error("spec does not preserve unknown fields")
	}
}

func TestStencilStatusFieldsCoverReserved(t *testing.T) {
	own := stencilStatusFields()
	for _, name := range append(contract.ReservedStatusFields, contract.StatusDeployedRelease) {
		if _, ok := own[name]; !ok {
			t.Errorf("no schema for stencil's status field %s", name)
		}
	}
}
