// Package console holds the operator console's browser assets (a page,
// its style sheet and its script modules), embedded in the binary.
// Package server serves them at /console, with a strict
// Content-Security-Policy; the pages call the server's JSON routes.
//
// There is no build step and no front-end library: the pages are a few
// tables, forms and line charts, written in plain HTML, CSS and
// JavaScript modules that browsers run as they are.
package console

import (
	"embed"
	"io/fs"
)

//go:embed assets
var assets embed.FS

// Assets returns the console's files, index.html at the top.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
