package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// addToEntry adds field (one line of YAML) to the gadget entry of the
// config at path, before its statusTemplate.
func addToEntry(t *testing.T, path, field string) {
	t.Helper()
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(cfg), "    statusTemplate:", "    "+field+"\n    statusTemplate:", 1)
	if edited == string(cfg) {
		t.Fatalf("%s has no statusTemplate line to add %s before", path, field)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStencilTestRolloutStatus: an entry with rollout goldens the status
// the controller writes, status.templateRevision included (the status
// configtest re-assembled before it ran the controller's sync had none).
func TestStencilTestRolloutStatus(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"rollout.yaml": `cases:
  - name: the status names the templates' revision
    resource: objects/gadget.yaml
    observed: [objects/db-live.yaml]
    golden: golden/rollout.yaml
`})
	addToEntry(t, path, "rollout: {maxInFlight: 1}")
	stencil(t, "", "test", "--config", path, "--update").expect(t, 0, []string{"1 passed, 0 failed, 1 golden files updated"}, nil)
	var doc struct {
		Status map[string]any `json:"status"`
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tests", "golden", "rollout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	rev, _ := doc.Status["templateRevision"].(string)
	if rev == "" {
		t.Fatalf("the golden status has no templateRevision:\n%s", data)
	}
	t.Logf("status.templateRevision: %s", rev)
	stencil(t, "", "test", "--config", path).expect(t, 0, []string{"1 passed, 0 failed"}, nil)

	// A template change is a new revision: the golden's status differs
	// there, and the diff says so.
	app := filepath.Join(filepath.Dir(path), "app.yaml.tmpl")
	if err := os.WriteFile(app, []byte(strings.Replace(gadgetApp, "--quiet", "--silent", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stencil(t, "", "test", "--config", path).expect(t, 1, []string{"@@ Gadget team-a/g .status.templateRevision @@", "-  templateRevision: " + rev}, nil)
}

// TestStencilTestSyncs: what only the controller's sync decides is what a
// case records: an observed child no template renders is pruned, a foreign
// object holding a child's name is an OwnershipConflict, and the events the
// sync records are the golden's.
func TestStencilTestSyncs(t *testing.T) {
	path := writeGadgetConfig(t, map[string]string{"sync.yaml": `cases:
  - name: an old child is pruned
    resource: objects/gadget.yaml
    observed:
      - objects/db-live.yaml
      - {apiVersion: v1, kind: Service, metadata: {name: g-old}}
    golden: golden/pruned.yaml
    assert:
      - "pruned == ['Service/g-old']"
      - "events.exists(e, e.startsWith('Normal ') && e.contains('Pruned Service/g-old'))"
  - name: a foreign Deployment holds the name
    resource: objects/gadget.yaml
    observed:
      - objects/db-live.yaml
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: g
          ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: other, uid: other-uid, controller: true}]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'OwnershipConflict' && c.message.contains('Deployment/g exists and is not controlled by Gadget g'))"
`})
	r := stencil(t, "", "test", "--config", path, "--update")
	if r.code != 0 || !strings.Contains(r.stdout, "2 passed, 0 failed, 1 golden files updated") {
		t.Fatalf("--update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tests", "golden", "pruned.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pruned:\n- Service/g-old\n", "events:\n", "Pruned Service/g-old"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the golden file lacks %q:\n%s", want, data)
		}
	}
}

// TestStencilTestIdentity: an entry with identity: {tenant: builder}. A
// case without rbac writes as an account that exists and may do anything;
// with rbac, each child write is checked as the API server checks the
// impersonated write: a Service the account may not create is Forbidden,
// naming the account, the verb and the kind, as the controller reports
// it; an account the rbac does not hold is IdentityNotFound; a Role
// without the Gadgets' finalizers is refused the owner reference's
// blockOwnerDeletion.
func TestStencilTestIdentity(t *testing.T) {
	const account = `{apiVersion: v1, kind: ServiceAccount, metadata: {name: builder}}`
	const binding = `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: builder}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: builder}, subjects: [{kind: ServiceAccount, name: builder, namespace: team-a}]}`
	role := func(resources string, finalizers bool) string {
		rules := `[{apiGroups: ["", apps], resources: [` + resources + `], verbs: [create, patch, delete]}`
		if finalizers {
			rules += `, {apiGroups: [gen.example.com], resources: [gadgets/finalizers], verbs: [update]}`
		}
		return `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: builder}, rules: ` + rules + `]}`
	}
	path := writeGadgetConfig(t, map[string]string{"identity.yaml": `cases:
  - name: without rbac the account may write anything
    resource: objects/gadget.yaml
    observed: [objects/db-live.yaml]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'Progressing')"
  - name: the builder may write both kinds
    resource: objects/gadget.yaml
    observed: [objects/db-live.yaml]
    rbac: [` + account + `, ` + role("deployments, services", true) + `, ` + binding + `]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'Progressing')"
  - name: the builder may not write Services
    resource: objects/gadget.yaml
    rbac: [` + account + `, ` + role("deployments", true) + `, ` + binding + `]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'Forbidden' && c.message.contains('system:serviceaccount:team-a:builder may not create Service in namespace team-a'))"
      - "events.exists(e, e.startsWith('Warning Forbidden'))"
  - name: the account does not exist
    resource: objects/gadget.yaml
    rbac: [` + role("deployments, services", true) + `, ` + binding + `]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'IdentityNotFound' && c.message.contains('ServiceAccount team-a/builder does not exist'))"
  - name: without the finalizers, blockOwnerDeletion is refused
    resource: objects/gadget.yaml
    rbac: [` + account + `, ` + role("deployments, services", false) + `, ` + binding + `]
    assert:
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'Forbidden' && c.message.contains('blockOwnerDeletion'))"
`})
	addToEntry(t, path, "identity: {tenant: builder}")
	r := stencil(t, "", "test", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "5 passed, 0 failed") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStencilTestReadsAsIdentity: the reads example with identity:
// {tenant: builder}. What the tenant names (the Secret its spec names,
// the peers its selector matches) is read as the builder account, as the
// controller's SubjectAccessReview reads it: a case whose rbac lets the
// builder get Secrets renders; one whose rbac does not is Forbidden,
// naming the account, the verb and the Secret, renders nothing, and
// nothing of the Secret reaches the status. The platform's fixed read
// (a ConfigMap in stencil-system) stays stencil's own.
func TestStencilTestReadsAsIdentity(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "crds", "reads")
	for _, name := range []string{"stencil.yaml", "deployment.yaml.tmpl", "samples/site.yaml", "samples/reads.yaml"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "stencil.yaml" {
			edited := strings.Replace(string(data), "    reads:\n", "    identity: {tenant: builder}\n    reads:\n", 1)
			if edited == string(data) {
				t.Fatalf("%s has no reads line to add the identity before", name)
			}
			data = []byte(edited)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rbac := func(resources string) string {
		return `[{apiVersion: v1, kind: ServiceAccount, metadata: {name: builder, namespace: team-a}},
      {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: builder, namespace: team-a}, rules: [
        {apiGroups: [apps], resources: [deployments], verbs: [create, patch, delete]},
        {apiGroups: [sites.example.com], resources: [sites/finalizers], verbs: [update]},
        {apiGroups: ["", sites.example.com], resources: [` + resources + `], verbs: [get, list]}]},
      {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: builder, namespace: team-a}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: builder}, subjects: [{kind: ServiceAccount, name: builder, namespace: team-a}]}]`
	}
	tests := `cases:
  - name: the builder may read what the Site names
    resource: ../samples/site.yaml
    reads: [../samples/reads.yaml]
    rbac: ` + rbac("secrets, sites") + `
    assert:
      - "objects.size() == 1"
      - "status.reads.size() == 4"
  - name: the builder may not read Secrets
    resource: ../samples/site.yaml
    reads: [../samples/reads.yaml]
    rbac: ` + rbac("sites") + `
    assert:
      - "objects.size() == 0"
      - "status.conditions.exists(c, c.type == 'Ready' && c.reason == 'Forbidden' && c.message.contains('system:serviceaccount:team-a:builder may not get secrets shop-db in namespace team-a'))"
      - "!has(status.reads)"
`
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "identity.yaml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	r := stencil(t, "", "test", "--config", filepath.Join(dir, "stencil.yaml"))
	if r.code != 0 || !strings.Contains(r.stdout, "2 passed, 0 failed") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, secret := range []string{"c2VjcmV0LXZhbHVl", "secret-value"} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("the Secret's data is in the output:\n%s%s", r.stdout, r.stderr)
		}
	}
}
