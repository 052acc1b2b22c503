//go:build !conformance

package mcp

import (
	"errors"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file stands in for conformance.go in builds without the
// conformance tag, the production ones: they have no fixtures, and
// Options.Conformance is refused.

// ConformanceFixtures reports whether this build has the MCP conformance
// suite's fixtures, that is whether it was built with -tags conformance.
const ConformanceFixtures = false

// errNoConformanceFixtures is New's refusal of Options.Conformance in a
// build without the fixtures.
var errNoConformanceFixtures = errors.New("conformance fixtures: this binary was built without the conformance fixtures; build with -tags conformance")

func conformanceOptions(*mcpsdk.ServerOptions) error { return errNoConformanceFixtures }

func conformanceComplete(*mcpsdk.CompleteRequest) (*mcpsdk.CompleteResult, bool) { return nil, false }

func addConformanceFixtures(*mcpsdk.Server) []string { return nil }
