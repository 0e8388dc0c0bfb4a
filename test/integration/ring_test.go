//go:build integration

package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"stencil.dev/stencil/controller/ring"
)

// TestShardSelectorSplitsNamespaces: 30 namespaces with a ConfigMap each;
// three ring members list ConfigMaps with the shardSelector of their
// ranges (controller/ring). Against the project's plane, where
// ShardedListAndWatch is on, the API server returns each ConfigMap to
// exactly the member whose ranges hold its namespace, as ring.Holds
// computes it. With the gate off (STENCIL_APISERVER_FEATURE_GATES=) the
// server ignores the selector and returns everything to everyone; the test
// then checks that this is detectable, which is how a member must find out
// whether to filter itself.
func TestShardSelectorSplitsNamespaces(t *testing.T) {
	ctx := context.Background()
	admin := dynamic.NewForConfigOrDie(restConfig(t))
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	label := "stencil.dev/ring-test=" + run
	var namespaces []string
	for i := range 30 {
		// Names that differ in more than their last two characters, as
		// most clusters' namespaces do: FNV-1a's high bits barely move
		// with a name's last bytes, so it-ring-00 ... it-ring-29 all
		// hash into one 2^-14 sliver of the space (see ring.Hash).
		ns := fmt.Sprintf("it-ring-%s-%x", run, sha256.Sum256([]byte{byte(i)}))[:len("it-ring-")+len(run)+9]
		namespaces = append(namespaces, ns)
		newNamespace(ctx, t, admin, ns)
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "probe", "labels": map[string]any{"stencil.dev/ring-test": run}}}}
		if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(ns), cm); err != nil {
			t.Fatal(err)
		}
	}
	members := []string{"stencil-0", "stencil-1", "stencil-2"}
	assignment := ring.Assign(members)
	seen := map[string][]string{} // namespace -> members that got it
	for _, m := range members {
		sel := ring.Selector(assignment[m])
		list, err := admin.Resource(configmaps).List(ctx, metav1.ListOptions{LabelSelector: label, ShardSelector: sel})
		if err != nil {
			t.Fatalf("%s: list with shardSelector %.80s...: %v", m, sel, err)
		}
		for _, cm := range list.Items {
			seen[cm.GetNamespace()] = append(seen[cm.GetNamespace()], m)
		}
		t.Logf("%s holds %.1f%% of the hash space: %d of 30 namespaces (%d ranges)", m, 100*ring.Share(assignment[m]), len(list.Items), len(assignment[m]))
	}
	// The plane's default turns the gate on (test/cluster/components.sh).
	gates, set := os.LookupEnv("STENCIL_APISERVER_FEATURE_GATES")
	gateOff := set && !strings.Contains(gates, "ShardedListAndWatch=true")
	if gateOff {
		for _, ns := range namespaces {
			if len(seen[ns]) != len(members) {
				t.Fatalf("gate off: %s returned to %v, want all %d members (the selector ignored)", ns, seen[ns], len(members))
			}
		}
		t.Log("gate off: the server ignored the selector, and every member got every namespace: detectable")
		return
	}
	for _, ns := range namespaces {
		var want []string
		for _, m := range members {
			if ring.Holds(assignment[m], ns) {
				want = append(want, m)
			}
		}
		slices.Sort(seen[ns])
		if len(want) != 1 || !slices.Equal(seen[ns], want) {
			t.Errorf("%s: returned to %v, ring.Holds says %v", ns, seen[ns], want)
		}
	}
}
