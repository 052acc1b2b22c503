//go:build !conformance

package mcp

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate"
)

// A build without the conformance tag has no fixtures and says so.
func TestConformanceNotBuilt(t *testing.T) {
	p, err := New(newFakeEngine(t), &Options{Tools: lakegate.DefaultTools, Conformance: true})
	if !errors.Is(err, errNoConformanceFixtures) || p != nil {
		t.Fatalf("got %v, %v; want nil, %v", p, err, errNoConformanceFixtures)
	}
}
