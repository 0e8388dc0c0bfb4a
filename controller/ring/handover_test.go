package ring

import (
	"slices"
	"strings"
	"testing"
)

// TestMayWrite: the handover rule.
func TestMayWrite(t *testing.T) {
	members := identities(3)
	names := namings(30, 7)["sequential"]
	v := NewView(members, names)
	var ns string
	for _, c := range names {
		if Holds(v.Share(members[0]), c) {
			ns = c
			break
		}
	}
	all := map[string]string{members[1]: v.ID(), members[2]: v.ID()}
	if ok, why := MayWrite(members[0], v, true, all, ns); !ok {
		t.Fatalf("the holder may not write for its namespace: %s", why)
	}
	if ok, _ := MayWrite(members[1], v, true, map[string]string{members[0]: v.ID(), members[2]: v.ID()}, ns); ok {
		t.Fatal("a member wrote for a namespace outside its share")
	}
	if ok, _ := MayWrite(members[0], v, false, all, ns); ok {
		t.Fatal("a member whose Lease expired wrote")
	}
	// A fourth member joins: until every member adopted the new view, no
	// one acting on it writes.
	joined := NewView(append(slices.Clone(members), "stencil-new"), names)
	partial := map[string]string{members[1]: joined.ID(), members[2]: v.ID(), "stencil-new": joined.ID()}
	if ok, why := MayWrite(members[0], joined, true, partial, ns); ok || !strings.Contains(why, members[2]) {
		t.Fatalf("wrote under a view %s has not adopted: %v %q", members[2], ok, why)
	}
	// The old view's holder cannot write either once another member moved on.
	if ok, _ := MayWrite(members[0], v, true, map[string]string{members[1]: joined.ID(), members[2]: v.ID()}, ns); ok {
		t.Fatal("wrote under the old view after a member adopted the new one")
	}
	if NewView([]string{"b", "a"}, names).ID() != NewView([]string{"a", "b", "a"}, reversed(names)).ID() {
		t.Fatal("the view ID depends on order or duplicates")
	}
	// Another division of the namespaces is another view, so the rule
	// also fences members that saw different namespaces.
	if NewView(members, names).ID() == NewView(members, names[:20]).ID() {
		t.Fatal("two divisions of the namespaces share a view ID")
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
