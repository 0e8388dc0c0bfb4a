// Package engine runs one template the way stencil must: hermetic (sprig's
// functions that touch no clock, network, environment or randomness, plus
// include, required and the structure helpers), structure-safe (a printed
// value lands as exactly one YAML value where its action stands), and under
// a budget (steps, text, list items, include depth). The templates package
// loads a config entry's files into one namespace, hands each parsed tree
// to Rewrite, binds each executor's functions to its State (Bind), and runs
// Execute and Decode; what it then makes of the values (the child contract,
// ownerReferences, labels) is its own.
//
// The choice a newcomer may question: safety comes from rewriting the
// parse tree before anything runs, not from escaping text afterwards. Every
// printing action is rewritten to record its value and print a placeholder
// token (safe.go, rewrite.go); the rendered document is parsed as YAML with
// the tokens in place, and each token is replaced by its value where it
// stands (decode.go, place.go). A tenant's string can then never become
// YAML syntax, and the budget's step counter rides the same rewrite, so a
// loop or a recursion is counted where it turns, whatever its body.
package engine
