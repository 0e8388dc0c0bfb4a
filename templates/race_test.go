//go:build race

package templates

// raceEnabled: the race detector makes every step several times slower, so
// the tests assert the bound that stopped a render, not its time.
const raceEnabled = true
