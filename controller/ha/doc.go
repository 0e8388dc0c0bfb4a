// Package ha keeps two stencil replicas from writing for one namespace at
// once: under leader election, the Lease lock fenced by the time each
// renewal was sent (FencedLock) and the run of the workers while it is
// held (Lead); in a ring, a member's view of the ring and its fence
// (RingState); and the gate that asks the fence once more in the HTTP
// transport, just before each write is sent (WriteGate).
//
// The choice a newcomer may question: every fence trips once and for
// good (tripwire). A leader or member whose Lease went stale stops its
// workers and exits to restart clean, even if a renewal sent before a
// pause lands after it, rather than resume beside the replica that may
// have taken over.
package ha
