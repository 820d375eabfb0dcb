//go:build !race

package stream_test

// raceEnabled is true under the race detector (see race_test.go).
const raceEnabled = false
