//go:build race

package main

// raceEnabled: under the race detector (make unit) a render is about six
// times slower, so the timed tests run fewer cases.
const raceEnabled = true
