package memory

// LostWorkers counts, per resource, the renders in a row whose render
// worker was lost from outside the render (templates.ErrWorkerLost: a
// signal stencil did not send, such as the node's OOM killer's). A loss
// is not the resource's failure, so it is retried and not reported; a
// resource whose renders keep losing their worker is reported once the
// count reaches a few, since its render may be what draws the OOM
// killer.
type LostWorkers struct {
	// states holds each resource's count (memory.go).
	states *States
}

// Add counts one more lost render of key and returns the count in a row.
func (l LostWorkers) Add(key Key) int {
	n := 0
	l.states.update(key, func(st *resourceState) {
		st.lost++
		n = st.lost
	})
	return n
}

// Reset forgets key's count: its render ran to the end.
func (l LostWorkers) Reset(key Key) {
	l.states.change(key, func(st *resourceState) { st.lost = 0 })
}
