package query

import (
	"encoding/base64"
	"testing"

	"github.com/lakegate/lakegate/query/sqlbuild"
)

// FuzzCursorPage: any signed cursor body either is refused or gives a
// start whose page is looked up in a cached entry without a panic, and
// found only inside the rows the entry holds.
func FuzzCursorPage(f *testing.F) {
	for _, s := range []string{`{"o":0,"h":"h"}`, `{"o":2,"h":"h","k":[3],"p":5}`, `{"o":1,"h":"h","k":["x"],"p":-4}`,
		`{"o":0,"h":"h","k":[1e400],"p":1}`, `{"o":9,"h":"h","p":2}`, `{"o":0,"h":"h","k":[],"p":0}`} {
		f.Add(s, 3, 2)
	}
	e := &Engine{opts: Options{CursorKey: []byte("fuzz key")}}
	row := func(i int64) []Cell { return []Cell{{Kind: CellInt, I: i}} }
	ent := &cacheEntry{rows: [][]Cell{row(3), row(4), row(5), row(6)}, base: 2, lead: []any{int64(2)}, res: Result{Truncated: true}}
	f.Fuzz(func(t *testing.T, body string, limit, base int) {
		b := base64.RawURLEncoding.EncodeToString([]byte(body))
		start, err := e.pageStart(b+"."+e.signCursor(b), "h")
		if err != nil {
			return
		}
		if start.place() < -1 {
			t.Fatalf("place %d", start.place())
		}
		s := &Stmt{Limit: max(1, limit%50), hash: "h", keys: []sqlbuild.Key{{Col: 0}}, start: start}
		ent := *ent
		ent.base = base % 10
		if p, ok := s.pageIn(&ent); ok && (p.from < 0 || p.to > len(ent.rows) || p.from > p.to) {
			t.Fatalf("page %+v of %d rows", p, len(ent.rows))
		}
	})
}
