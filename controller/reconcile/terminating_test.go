package reconcile

import "testing"

func TestTerminatingNamespaces(t *testing.T) {
	var tn terminatingNamespaces
	if _, ok := tn.left("a"); ok {
		t.Fatal("a namespace never refused counts as terminating")
	}
	tn.mark("a")
	left, ok := tn.left("a")
	if !ok || left <= 0 || left > terminatingTTL {
		t.Fatalf("left(a) = %v, %v; want (0, %v], true", left, ok, terminatingTTL)
	}
	if _, ok := tn.left("b"); ok {
		t.Fatal("marking a marked b")
	}
	tn.since["a"] = tn.since["a"].Add(-terminatingTTL)
	if _, ok := tn.left("a"); ok {
		t.Fatal("the mark did not expire after terminatingTTL")
	}
	if _, ok := tn.since["a"]; ok {
		t.Fatal("an expired mark is kept")
	}
}
