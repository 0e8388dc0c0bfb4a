//go:build race

package configtest

// raceEnabled: under the race detector (make unit) CEL evaluates several
// times slower, so a timed test checks the time only without it.
const raceEnabled = true
