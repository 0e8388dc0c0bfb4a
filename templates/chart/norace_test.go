//go:build !race

package chart

// raceEnabled: see race_test.go.
const raceEnabled = false
