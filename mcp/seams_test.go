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

// The plugin's parts keep to go-sdk's seams: the tools never see HTTP
// routing, the transports never see the query engine, and only plugin.go
// knows the Plugin, the composition root. Until the parts are packages of
// their own, which the compiler would hold to that, this test does.
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
	rules := []struct {
		part      string
		files     []string
		forbidden []string
	}{
		{"tools", []string{"toolset.go", "handlers.go", "results.go", "tools.go", "args.go", "workers.go", "observe.go"},
			[]string{"github.com/gin-gonic/gin"}},
	}
	for _, r := range rules {
		for _, name := range r.files {
			f := parsed[name]
			if f == nil {
				t.Errorf("%s: %s is not in the package; update the rule", r.part, name)
				continue
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if slices.Contains(r.forbidden, path) {
					t.Errorf("%s: %s imports %s", r.part, name, path)
				}
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
