//go:build !race

package testutil

// RaceEnabled reports whether this binary was built with -race.
const RaceEnabled = false
