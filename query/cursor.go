package query

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// A cursor continues a truncated result where it stopped. It is opaque to
// the caller: base64url of {"o": offset, "h": hash}, a dot, and an HMAC
// of that made with the engine's cursor key, so that it cannot be made or
// changed outside the server. The hash names the request it belongs to
// (everything but its row cap and cursor), so that a cursor cannot be used
// with another request. Paging is by offset over the result's order: the
// structured builder makes that order total (sqlbuild's tie-breakers);
// caller-written SQL pages in its own ORDER BY, and the hint says when
// there is none.
//
// A structured request whose order is total pages by keyset: its cursor
// also carries the keys of the row the page follows (sqlbuild.Key), and
// the page starts after that row, then skips Offset rows (those of a page
// cut short by a reader's budget, CursorAt): a deep page costs what the
// first does, and rows inserted before it never shift it.
//
// A cursor also says where its page starts in the whole result (p), when
// that is known, so that the result cache can answer the page from rows
// it holds (cache.go).
type cursorData struct {
	Offset int    `json:"o"`
	Hash   string `json:"h"`
	Keys   []any  `json:"k,omitempty"`
	Pos    *int   `json:"p,omitempty"`
}

// maxCursor bounds a cursor's length; keys that make it longer (a long
// text key) page by offset from the page's own start.
const maxCursor = 4096

// pageStart is where a page starts: after the row whose keys are after
// (nil: the result's start), then offset rows on. at, for a start after
// keys, is 1 + its first row's place in the whole result; 0 when not
// known (a tail's page, a cursor that did not say).
type pageStart struct {
	after  []any
	offset int
	at     int
}

// place is where the page starts in the whole result, counted from 0; -1
// when not known.
func (p pageStart) place() int {
	if p.after == nil {
		return p.offset
	}
	return p.at - 1
}

// on is the start n rows on from p: after the row of keys after, or
// (nil) n rows further from p's own start.
func (p pageStart) on(n int, after []any) pageStart {
	if after == nil {
		next := pageStart{after: p.after, offset: p.offset + n}
		if p.at > 0 {
			next.at = p.at + n
		}
		return next
	}
	next := pageStart{after: after}
	if pos := p.place(); pos >= 0 {
		next.at = pos + n + 1
	}
	return next
}

// requestHash names what a request asks, whatever page it is on: parts
// are everything but the row cap and cursor.
func requestHash(parts ...any) string {
	b, err := json.Marshal(parts)
	if err != nil {
		// Values that cannot be encoded cannot be paged either.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// newCursorKey is a random cursor key, for an engine given none.
func newCursorKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func (e *Engine) signCursor(body string) string {
	m := hmac.New(sha256.New, e.opts.CursorKey)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// encodeCursor is the cursor of the page p of the request of hash, or ""
// when it would be longer than maxCursor.
func (e *Engine) encodeCursor(p pageStart, hash string) string {
	d := cursorData{Offset: p.offset, Hash: hash, Keys: p.after}
	if pos := p.place(); pos >= 0 && p.after != nil {
		d.Pos = &pos
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	body := base64.RawURLEncoding.EncodeToString(b)
	c := body + "." + e.signCursor(body)
	if len(c) > maxCursor {
		return ""
	}
	return c
}

// pageStart is where the page of cursor c starts, for the request of
// hash: the result's start without a cursor.
func (e *Engine) pageStart(c, hash string) (pageStart, error) {
	if c == "" {
		return pageStart{}, nil
	}
	bad := errBadCursor
	body, sig, ok := strings.Cut(c, ".")
	if !ok || len(c) > maxCursor || !hmac.Equal([]byte(sig), []byte(e.signCursor(body))) {
		return pageStart{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return pageStart{}, bad
	}
	var d cursorData
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keys keep their digits: an int64 key stays exact
	if err := dec.Decode(&d); err != nil || d.Hash != hash || d.Offset < 0 || d.Offset > maxOffset {
		return pageStart{}, bad
	}
	p := pageStart{after: d.Keys, offset: d.Offset}
	if p.after != nil && d.Pos != nil && *d.Pos > d.Offset && *d.Pos <= maxOffset {
		p.at = *d.Pos + 1
	}
	return p, nil
}

// paging is how a statement's pages follow one another, for the hint of
// a truncated result.
type paging int

const (
	pagingKeyset    paging = iota // after the last row's keys
	pagingOffset                  // caller-written SQL with ORDER BY
	pagingUnordered               // caller-written SQL without ORDER BY
	pagingNoKey                   // a structured request on a table without a primary key
)

// truncatedHint is the next step of a truncated result: the cursor, a
// larger row cap, or an export, with what pages by offset cost.
func (e *Engine) truncatedHint(p paging) string {
	h := "more rows exist: pass next_cursor as cursor for the next page; to learn about all of them, aggregate " +
		"(count, min, max, GROUP BY) or filter instead of reading them, and for a program export every row (export; a format on REST)"
	switch p {
	case pagingUnordered:
		h += "; the SQL has no ORDER BY, so pages may overlap or skip rows: order by a unique key for stable pages"
	case pagingNoKey:
		h += "; the table has no primary key, so pages go by offset: a deep page costs reading every row before it, and rows " +
			"inserted meanwhile shift the pages"
	}
	return h
}
