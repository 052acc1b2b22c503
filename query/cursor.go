package query

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// A cursor is base64url of {"o": offset, "h": hash}: paging is by offset,
// and the hash of the request (without limit, offset and cursor) stops a
// cursor from being used with another request. It is not a secret: it
// only names an offset the caller could ask for directly.
type cursorData struct {
	Offset int    `json:"o"`
	Hash   string `json:"h"`
}

// requestHash identifies what a request asks, whatever page it is on.
func requestHash(r Request) string {
	r.Limit, r.Offset, r.Cursor = 0, 0, ""
	b, err := json.Marshal(r)
	if err != nil {
		// Values that cannot be encoded cannot be paged either.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func encodeCursor(offset int, hash string) string {
	b, _ := json.Marshal(cursorData{Offset: offset, Hash: hash})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the offset of cursor c, made for the request of hash.
func decodeCursor(c, hash string) (int, error) {
	bad := &Error{Kind: KindValidation, Message: "the cursor is not valid for this request",
		Hint: "pass next_cursor unchanged with the same request, or start again without cursor"}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) > 256 {
		return 0, bad
	}
	var d cursorData
	if err := json.Unmarshal(raw, &d); err != nil || d.Hash != hash || d.Offset < 0 || d.Offset > maxOffset {
		return 0, bad
	}
	return d.Offset, nil
}
