//go:build race

package remotinge2e

const raceDetector = true
