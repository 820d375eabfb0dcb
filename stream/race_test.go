//go:build race

package stream_test

// raceEnabled is true under the race detector, which makes the jobs of
// the differential tests several times slower: they run fewer seeds by
// default.
const raceEnabled = true
