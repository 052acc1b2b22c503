//go:build !race

package testutil

// Race reports whether the race detector is on: work whose time a test
// depends on (a query meant to outlast a bound) runs many times slower.
const Race = false
