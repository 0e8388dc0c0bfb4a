//go:build race

package chart

// raceEnabled: the race detector makes every step several times slower and
// allocates for its own bookkeeping, so under it the tests assert the bound
// that stopped a render, not its time or allocation (make unit runs -race;
// go test ./templates checks both).
const raceEnabled = true
