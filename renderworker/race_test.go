//go:build race

package renderworker_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = true
