//go:build !race

package configtest

// raceEnabled: see race_test.go.
const raceEnabled = false
