//go:build race

package state

// raceEnabled says the race detector is on: tests of the Pebble backend,
// many times slower under it, do less.
const raceEnabled = true
