//go:build !race

package templates

// raceEnabled: see race_test.go.
const raceEnabled = false
