package lookedat

import (
	"testing"

	"github.com/google/cel-go/cel"
)

// TestActivationRecordsWhatAnAssertionRead runs an assertion over the
// recording values and checks what a failure would print: the fields read
// of the object the filter kept, the other named only, and the status.
func TestActivationRecordsWhatAnAssertionRead(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("objects", cel.ListType(cel.DynType)),
		cel.Variable("status", cel.DynType), cel.Variable("resource", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(`objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == 3) && status.ready`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{
		"objects": []any{
			map[string]any{"kind": "Service", "metadata": map[string]any{"name": "db"}},
			map[string]any{"kind": "Deployment", "spec": map[string]any{"replicas": int64(2)}},
		},
		"status":   map[string]any{"ready": true},
		"resource": map[string]any{"kind": "WebApp"},
	}
	recording, rec := Activation(vars, []string{"Service ns/db", "Deployment ns/web"}, "resource WebApp ns/web")
	if _, ok := vars["objects"].([]any); !ok {
		t.Fatal("Activation changed the variables it was given")
	}
	out, _, err := prog.Eval(recording)
	if err != nil {
		t.Fatal(err)
	}
	if out.Value() != false {
		t.Fatalf("assertion = %v, want false", out.Value())
	}
	want := "looked at:\n    Deployment ns/web: .kind = \"Deployment\", .spec.replicas = 2\n    only the kind or name of: Service ns/db"
	if got := rec.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	if got := (&Record{}).String(); got != "" {
		t.Errorf("String() of nothing read = %q, want empty", got)
	}
}
