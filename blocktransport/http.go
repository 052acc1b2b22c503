package blocktransport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// MIMEType is the media type of a transfer's format.
func MIMEType(format string) string {
	switch format {
	case "ndjson":
		return "application/x-ndjson"
	case "csv":
		return "text/csv; charset=utf-8"
	}
	return "application/octet-stream"
}

// The HTTP handlers below serve what the caller has already authorised:
// they check nothing about who asks. Errors are the caller's to render
// (ErrNotFound, ErrNoBlock), except once the body has begun.

// ServeManifest writes m as JSON.
func ServeManifest(w http.ResponseWriter, m *Manifest) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "private, no-store")
	_ = json.NewEncoder(w).Encode(m)
}

// ServeBlock serves block n of transfer id with its SHA-256 as the ETag;
// Range and conditional requests (If-None-Match, If-Range) are honoured.
func (s *Store) ServeBlock(w http.ResponseWriter, r *http.Request, id string, n int) error {
	f, b, err := s.OpenBlock(id, n)
	if err != nil {
		return err
	}
	defer f.Close()
	m, _, err := s.Lookup(id)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", MIMEType(m.Format))
	h.Set("ETag", `"`+b.SHA256+`"`)
	left := s.opts.TTL // a sealed block of a transfer being written lives at least this long
	if m.Complete {
		left = m.Expires.Sub(s.opts.Now())
	}
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(left.Seconds())))
	h.Set("X-Block-Sha256", b.SHA256)
	http.ServeContent(w, r, "", m.Created, f)
	return nil
}

// ServeAll streams the whole result, block after block, with chunked
// encoding. Each block is checked against its SHA-256 as it is sent: on a
// mismatch the response is cut off (no clean end), so a client never takes
// damaged data for a complete result.
func (s *Store) ServeAll(w http.ResponseWriter, r *http.Request, id string) error {
	m, _, err := s.Lookup(id)
	if err != nil {
		return err
	}
	if !m.Complete {
		return ErrWriting
	}
	h := w.Header()
	h.Set("Content-Type", MIMEType(m.Format))
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Sha256", m.SHA256)
	h.Set("X-Row-Count", strconv.FormatInt(m.Rows, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	for _, b := range m.Blocks {
		if err := s.copyBlock(w, id, b); err != nil {
			// The status is sent: abort the connection so the client sees
			// an incomplete body.
			panic(http.ErrAbortHandler)
		}
	}
	return nil
}

// copyBlock copies one block to w, checking its size and SHA-256.
func (s *Store) copyBlock(w io.Writer, id string, b Block) error {
	f, _, err := s.OpenBlock(id, b.N)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(f, b.Size))
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); n != b.Size || got != b.SHA256 {
		return &ChecksumError{Want: b.SHA256, Got: got}
	}
	return nil
}
