//go:build integration

package integration

import (
	"context"
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

// TestShardSelectorSplitsNamespaces: 30 namespaces named in sequence, as
// clusters name them, with a ConfigMap each; three ring members list
// ConfigMaps with the shardSelector of their ranges (controller/ring).
// Against the project's plane, where ShardedListAndWatch is on, the API
// server returns each ConfigMap to exactly the member whose ranges hold
// its namespace, as ring.Holds computes it, 10 to each. The same with the
// 30 among 3,000 namespaces: each member's selector is cut down to
// ring.MaxSelectorRanges terms, which the server takes, and it returns at
// least the member's own. With the gate off (STENCIL_APISERVER_FEATURE_GATES=) the
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
		// FNV-1a's high bits barely move with a name's last bytes: these
		// 30 hash into one sliver of the space (see ring.Hash), which an
		// even split of the space gave to one member.
		ns := fmt.Sprintf("it-ring-%s-%02d", run, i)
		namespaces = append(namespaces, ns)
		newNamespace(ctx, t, admin, ns)
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "probe", "labels": map[string]any{"stencil.dev/ring-test": run}}}}
		if _, err := createOnce(ctx, admin.Resource(configmaps).Namespace(ns), cm); err != nil {
			t.Fatal(err)
		}
	}
	members := []string{"stencil-0", "stencil-1", "stencil-2"}
	assignment := ring.Assign(members, namespaces)
	seen := map[string][]string{} // namespace -> members that got it
	for _, m := range members {
		sel := ring.Selector(assignment.Ranges[m])
		list, err := admin.Resource(configmaps).List(ctx, metav1.ListOptions{LabelSelector: label, ShardSelector: sel})
		if err != nil {
			t.Fatalf("%s: list with shardSelector %.80s...: %v", m, sel, err)
		}
		for _, cm := range list.Items {
			seen[cm.GetNamespace()] = append(seen[cm.GetNamespace()], m)
		}
		t.Logf("%s holds %d of 30 namespaces (%d ranges); the server returned %d", m, assignment.Held[m], len(assignment.Ranges[m]), len(list.Items))
	}
	// Among 3,000 namespaces (the others need not exist: only the
	// selector's length is tried), each member's selector has
	// MaxSelectorRanges terms.
	many := slices.Clone(namespaces)
	for i := range 2970 {
		many = append(many, fmt.Sprintf("other-%04d", i))
	}
	big := ring.Assign(members, many)
	bigSeen := map[string][]string{}
	for _, m := range members {
		sel := ring.Selector(big.Ranges[m])
		list, err := admin.Resource(configmaps).List(ctx, metav1.ListOptions{LabelSelector: label, ShardSelector: sel})
		if err != nil {
			t.Fatalf("%s: list with a shardSelector of %d terms (%d bytes): %v", m, strings.Count(sel, "shardRange("), len(sel), err)
		}
		for _, cm := range list.Items {
			bigSeen[cm.GetNamespace()] = append(bigSeen[cm.GetNamespace()], m)
		}
		t.Logf("3,000 namespaces: %s holds %d in %d ranges; a selector of %d terms (%d bytes) returned %d of the 30", m, big.Held[m], len(big.Ranges[m]), strings.Count(sel, "shardRange("), len(sel), len(list.Items))
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
			if ring.Holds(assignment.Ranges[m], ns) {
				want = append(want, m)
			}
			if ring.Holds(big.Ranges[m], ns) && !slices.Contains(bigSeen[ns], m) {
				t.Errorf("3,000 namespaces: %s holds %s, but its selector did not return it", m, ns)
			}
		}
		slices.Sort(seen[ns])
		if len(want) != 1 || !slices.Equal(seen[ns], want) {
			t.Errorf("%s: returned to %v, ring.Holds says %v", ns, seen[ns], want)
		}
	}
	for _, m := range members {
		if assignment.Held[m] != 10 {
			t.Errorf("30 namespaces among 3 members: %v, want 10 each", assignment.Held)
			break
		}
	}
}
