package renderworker

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"
)

// The memo of renders. A render is a pure function of what a request
// frame holds (the config snapshot's generation, the entry, the
// resource's view with its reads, the bounds): own templates are
// hermetic, and chart mode fails a render whose applied objects a random
// function or the clock reached (package funcs). So a request byte for
// byte the same as one that rendered a moment ago is answered with that
// render's result frame, decoded again, without a worker. That is what
// the syncs of a new resource ask: its children's status events, and the
// event of stencil's own status patch, bring it back two or three times
// within seconds, each time with the same view (the status, which the
// patch changed, is in the request only where a template may read it:
// templates.Set.Visible).
//
// The choice a newcomer may question: the memo keeps result frames, not
// Results, and only for minutes. A decoded Result of a small resource
// holds about 15 KiB of heap, its frame a tenth of that; decoding a frame
// costs a tenth of a render in a worker, and gives every sync a Result of
// its own to stamp. Kept for minutes, the memo holds the frames of what
// is converging now, and nothing of a settled cluster once it is quiet: a
// resync, minutes apart, renders each resource once and gains nothing
// from it. A render that asked about live children (Live) is not kept:
// its answers are not in the request. Failures are not kept either: the
// reconciler's own memo of failed renders handles those per resource.

// Default bounds of the memo (Options.MemoBytes, Options.MemoTTL).
const (
	defaultMemoBytes = 16 << 20
	defaultMemoTTL   = 2 * time.Minute
	// memoEntryOverhead is what an entry costs beyond its frame: its key
	// and its place in a map.
	memoEntryOverhead = 96
)

// memoKey is the SHA-256 of a generation's number and a request frame.
type memoKey [sha256.Size]byte

// keyOf is the key of the request frame payload of generation gen.
func keyOf(gen uint64, payload []byte) memoKey {
	h := sha256.New()
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], gen)
	h.Write(g[:])
	h.Write(payload)
	var k memoKey
	h.Sum(k[:0])
	return k
}

// memo holds result frames by request, in two halves: entries go into
// cur; every ttl, or once cur holds half the bytes, cur becomes prev and
// the old prev is dropped. An entry is thus kept between ttl and twice
// that after its last use, and the whole within max bytes. It is safe
// for concurrent use.
type memo struct {
	ttl  time.Duration
	half int
	now  func() time.Time

	mu        sync.Mutex
	cur, prev map[memoKey][]byte
	curBytes  int
	since     time.Time
}

// newMemo returns a memo of at most maxBytes whose entries live ttl to
// twice ttl after their last use; nil (no memo) when maxBytes < 0.
func newMemo(maxBytes int, ttl time.Duration) *memo {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = defaultMemoBytes
	}
	if ttl <= 0 {
		ttl = defaultMemoTTL
	}
	return &memo{ttl: ttl, half: maxBytes / 2, now: time.Now}
}

// get returns the result frame kept for k.
func (m *memo) get(k memoKey) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.age()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.prev[k]
	if ok {
		// Used again: kept for another ttl at least.
		delete(m.prev, k)
		m.add(k, v)
	}
	return v, ok
}

// put keeps the result frame v for k.
func (m *memo) put(k memoKey, v []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.age()
	if _, ok := m.cur[k]; !ok {
		m.add(k, v)
	}
}

// add puts v in cur, turning the halves first when it would not fit.
func (m *memo) add(k memoKey, v []byte) {
	size := len(v) + memoEntryOverhead
	if size > m.half {
		return
	}
	if m.curBytes+size > m.half {
		m.turn()
	}
	if m.cur == nil {
		m.cur = map[memoKey][]byte{}
	}
	m.cur[k] = v
	m.curBytes += size
}

// age turns the halves once cur is ttl old, twice once it is twice that.
func (m *memo) age() {
	now := m.now()
	switch {
	case now.Sub(m.since) >= 2*m.ttl:
		m.cur, m.prev, m.curBytes, m.since = nil, nil, 0, now
	case now.Sub(m.since) >= m.ttl:
		m.turn()
	}
}

// turn makes cur the previous half and starts an empty one.
func (m *memo) turn() {
	m.prev, m.cur, m.curBytes, m.since = m.cur, nil, 0, m.now()
}

// bytes is what the memo holds, keys and maps counted, for tests.
func (m *memo) bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.curBytes
	for _, v := range m.prev {
		n += len(v) + memoEntryOverhead
	}
	return n
}
