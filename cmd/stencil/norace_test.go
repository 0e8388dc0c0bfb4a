//go:build !race

package main

// raceEnabled says the tests run under the race detector, which multiplies
// a process's memory: bounds on resident memory are logged, not checked.
const raceEnabled = false
