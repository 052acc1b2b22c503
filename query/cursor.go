package query

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/lakegate/lakegate"
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
type cursorData struct {
	Offset int    `json:"o"`
	Hash   string `json:"h"`
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

// encodeCursor is the cursor of the page at offset of the request of hash.
func (e *Engine) encodeCursor(offset int, hash string) string {
	b, _ := json.Marshal(cursorData{Offset: offset, Hash: hash})
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + e.signCursor(body)
}

// pageStart is where the page of cursor c starts, for the request of
// hash: 0 without a cursor.
func (e *Engine) pageStart(c, hash string) (int, error) {
	if c == "" {
		return 0, nil
	}
	bad := &lakegate.Error{Kind: lakegate.KindValidation, Message: "the cursor is not valid for this request",
		Hint: "pass next_cursor unchanged with the same request (only the row cap may change), or start again without cursor"}
	body, sig, ok := strings.Cut(c, ".")
	if !ok || len(c) > 512 || !hmac.Equal([]byte(sig), []byte(e.signCursor(body))) {
		return 0, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return 0, bad
	}
	var d cursorData
	if err := json.Unmarshal(raw, &d); err != nil || d.Hash != hash || d.Offset < 0 || d.Offset > maxOffset {
		return 0, bad
	}
	return d.Offset, nil
}

// truncatedHint is the next step of a truncated result: the cursor, a
// larger row cap, or an export; unordered says the SQL gives no ORDER BY,
// so its pages may overlap or skip rows.
func (e *Engine) truncatedHint(unordered bool) string {
	h := "more rows exist: pass next_cursor as cursor for the next page; to learn about all of them, aggregate " +
		"(count, min, max, GROUP BY) or filter instead of reading them, and for a program export every row (export; a format on REST)"
	if unordered {
		h += "; the SQL has no ORDER BY, so pages may overlap or skip rows: order by a unique key for stable pages"
	}
	return h
}
