package renderworker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestMemoBounds holds the memo to its bounds: within max bytes however
// much is put, an entry used within ttl kept through a turn, and nothing
// kept twice ttl after the last use.
func TestMemoBounds(t *testing.T) {
	now := time.Unix(0, 0)
	m := newMemo(64<<10, time.Minute)
	m.now = func() time.Time { return now }
	frame := bytes.Repeat([]byte("x"), 1000)
	key := func(i int) memoKey { return keyOf(1, fmt.Appendf(nil, "request %d", i)) }

	for i := range 1000 {
		m.put(key(i), frame)
		if got := m.bytes(); got > 64<<10 {
			t.Fatalf("after %d puts the memo holds %d bytes, over its 65536", i+1, got)
		}
	}
	if _, ok := m.get(key(999)); !ok {
		t.Fatal("the last frame put is not kept")
	}
	if _, ok := m.get(key(0)); ok {
		t.Fatal("the first of 1000 frames of 1 KB is still kept in a memo of 64 KiB")
	}

	// Used again within ttl: kept through the turn at ttl.
	now = now.Add(50 * time.Second)
	m.put(key(1001), frame)
	now = now.Add(20 * time.Second) // past ttl: cur turns
	if _, ok := m.get(key(1001)); !ok {
		t.Fatal("a frame put 20 s ago is gone after one turn")
	}
	// Twice ttl without a use: nothing is kept.
	now = now.Add(2*time.Minute + time.Second)
	if _, ok := m.get(key(1001)); ok {
		t.Fatal("a frame unused for over twice ttl is still kept")
	}
	if got := m.bytes(); got != 0 {
		t.Fatalf("a memo unused for twice ttl holds %d bytes", got)
	}

	if newMemo(-1, 0) != nil {
		t.Fatal("MemoBytes < 0 must turn the memo off")
	}
}

// TestEncodeValueIsOrdered holds the wire encoding of a mapping to one
// byte string, keys in order as json.Marshal writes them: the memo keys on
// it, so two encodings of the same view must not differ by map order.
func TestEncodeValueIsOrdered(t *testing.T) {
	v := map[string]any{}
	for i := range 64 {
		v[fmt.Sprintf("k%02d", i)] = map[string]any{"b": int64(i), "a": []any{"x", map[string]any{"z": true, "y": nil}}}
	}
	first, err := encodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(v)
	if !bytes.Equal(first, want) {
		t.Fatalf("encodeValue:\n%s\njson.Marshal:\n%s", first, want)
	}
	for range 20 {
		again, _ := encodeValue(v)
		if !bytes.Equal(again, first) {
			t.Fatalf("two encodings of one mapping differ:\n%s\n%s", first, again)
		}
	}
}
