package requeue

import (
	"errors"
	"testing"
	"time"
)

func TestSplitReturnsTheDelayAndTheErrorBeside(t *testing.T) {
	if d, err := Split(After(Terminal(errors.New("x")), time.Second)); d != time.Second || !IsTerminal(err) {
		t.Errorf("Split = %v, %v; want 1s and the terminal error", d, err)
	}
	if d, err := Split(After(nil, 0)); d != 0 || err != nil {
		t.Errorf("Split(After(nil, 0)) = %v, %v; want 0, nil", d, err)
	}
	plain := errors.New("timeout")
	if d, err := Split(plain); d != 0 || err != plain || IsTerminal(err) {
		t.Errorf("Split(plain) = %v, %v; want 0 and the same transient error", d, err)
	}
	if Terminal(nil) != nil {
		t.Error("Terminal(nil) is not nil")
	}
}
