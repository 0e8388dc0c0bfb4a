package memory

import "testing"

func TestTerminatingNamespaces(t *testing.T) {
	var tn Terminating
	if _, ok := tn.Left("a"); ok {
		t.Fatal("a namespace never refused counts as terminating")
	}
	tn.Mark("a")
	left, ok := tn.Left("a")
	if !ok || left <= 0 || left > TerminatingTTL {
		t.Fatalf("left(a) = %v, %v; want (0, %v], true", left, ok, TerminatingTTL)
	}
	if _, ok := tn.Left("b"); ok {
		t.Fatal("marking a marked b")
	}
	tn.since["a"] = tn.since["a"].Add(-TerminatingTTL)
	if _, ok := tn.Left("a"); ok {
		t.Fatal("the mark did not expire after TerminatingTTL")
	}
	if _, ok := tn.since["a"]; ok {
		t.Fatal("an expired mark is kept")
	}
}
