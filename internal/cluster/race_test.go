//go:build race

package cluster_test

// raceEnabled is true under the race detector, which makes jobs several
// times slower: TestClusterDifferentialTaskManagerLoss runs fewer seeds.
const raceEnabled = true
