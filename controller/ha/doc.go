// Package ha keeps two stencil replicas from writing for one namespace at
// once: under leader election, the Lease lock fenced by the time each
// renewal was sent (FencedLock) and the run of the workers while it is
// held (Lead); the gate that asks the fence once more in the HTTP
// transport, just before each write is sent (WriteGate); and what a ring
// member's fence (package ring) shares with the leader's: the one-way
// switch (Tripwire), the Lease timings and the identity.
//
// The choice a newcomer may question: every fence trips once and for
// good (Tripwire). A leader or member whose Lease went stale stops its
// workers and exits to restart clean, even if a renewal sent before a
// pause lands after it, rather than resume beside the replica that may
// have taken over.
package ha
