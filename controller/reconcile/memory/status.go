package memory

// Status remembers, per resource, the last status patch sent and the
// status the server stored in answer, so that a sync whose status would
// not change sends nothing.
type Status struct {
	states *States
}

// Matches reports whether want was the last status sent for key and
// current is what the server stored in answer: the patch would change
// nothing.
func (m Status) Matches(key Key, want, current string) bool {
	var ok bool
	m.states.view(key, func(st *resourceState) {
		ok = st != nil && st.sent && st.status == [2]string{want, current}
	})
	return ok
}

// Set records that want was sent for key and the server stored stored.
func (m Status) Set(key Key, want, stored string) {
	m.states.update(key, func(st *resourceState) { st.status, st.sent = [2]string{want, stored}, true })
}
