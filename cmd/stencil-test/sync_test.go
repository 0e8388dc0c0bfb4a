package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

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
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	withRollout := strings.Replace(string(cfg), "    statusTemplate:", "    rollout: {maxInFlight: 1}\n    statusTemplate:", 1)
	if err := os.WriteFile(path, []byte(withRollout), 0o644); err != nil {
		t.Fatal(err)
	}
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
