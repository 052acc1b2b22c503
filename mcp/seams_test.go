package mcp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The plugin's parts keep to go-sdk's seams. The tools (internal/tools)
// and the transports (internal/transport) are packages of their own: the
// compiler keeps each from the other's unexported parts and from the
// Plugin. What they import is theirs to choose, so this test holds them
// to the rest: the tools never see HTTP routing (gin) nor the transports,
// the transports never see the query engine nor the tools, directly or
// through the plugin's shared packages. Within package mcp, only
// plugin.go knows the Plugin, the composition root: no other part's
// function takes or returns it.
func TestSeams(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]*ast.File{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
	}
	const module = "github.com/lakegate/lakegate/mcp/"
	for _, r := range []struct {
		dir       string
		forbidden []string
	}{
		{"internal/tools", []string{"github.com/gin-gonic/gin", module + "internal/transport", "github.com/lakegate/lakegate/server"}},
		{"internal/transport", []string{"github.com/lakegate/lakegate/query", module + "internal/tools", "github.com/lakegate/lakegate/server"}},
	} {
		for path, via := range reach(t, fset, r.dir, module) {
			if slices.Contains(r.forbidden, path) {
				t.Errorf("%s imports %s (in %s)", r.dir, path, via)
			}
		}
	}
	for name, f := range parsed {
		if name == "plugin.go" {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			var sig []ast.Node
			if fn.Recv != nil {
				sig = append(sig, fn.Recv)
			}
			sig = append(sig, fn.Type)
			for _, n := range sig {
				ast.Inspect(n, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok && id.Name == "Plugin" {
						t.Errorf("%s: %s mentions Plugin in its signature; only plugin.go may", fset.Position(fn.Pos()), fn.Name.Name)
					}
					return true
				})
			}
		}
	}
}

// reach maps each import path the package in dir reaches, directly or
// through the packages of module it imports, to the directory that
// imports it.
func reach(t *testing.T, fset *token.FileSet, dir, module string) map[string]string {
	t.Helper()
	seen := map[string]string{}
	dirs := []string{dir}
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", d, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if _, ok := seen[path]; ok {
					continue
				}
				seen[path] = d
				if rest, ok := strings.CutPrefix(path, module); ok {
					dirs = append(dirs, filepath.FromSlash(rest))
				}
			}
		}
	}
	return seen
}
