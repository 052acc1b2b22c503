package blocktransport

import (
	"encoding/json"
	"hash/crc32"
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
	h.Set("ETag", `"`+b.CRC32C+`"`)
	left := s.opts.TTL // a sealed block of a transfer being written lives at least this long
	if m.Complete {
		left = m.Expires.Sub(s.opts.Now())
	}
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(left.Seconds())))
	h.Set("X-Block-Crc32c", b.CRC32C)
	http.ServeContent(w, r, "", m.Created, f)
	return nil
}

// ServeAll streams the whole result, block after block, with chunked
// encoding. A transfer still being written is followed: each block goes
// out as soon as it is sealed, and the SHA-256 and row count, known only at
// the end, come as trailers. Each block is checked against its CRC-32C as
// it is sent. A response that cannot end whole (a damaged block, a
// transfer aborted or expired before its end, a request ended) is cut off,
// with no clean end, so a client never takes part of a result for all of
// it.
func (s *Store) ServeAll(w http.ResponseWriter, r *http.Request, id string) error {
	m, _, err := s.Lookup(id)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", MIMEType(m.Format))
	h.Set("Cache-Control", "private, no-store")
	following := !m.Complete
	if following {
		h.Set("Trailer", "X-Content-Sha256, X-Row-Count")
	} else {
		setEnd(h, m)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	sent := 0
	for {
		for _, b := range m.Blocks[sent:] {
			if err := s.copyBlock(w, id, b); err != nil {
				// The status is sent: abort the connection so the client
				// sees an incomplete body.
				panic(http.ErrAbortHandler)
			}
		}
		sent = len(m.Blocks)
		if m.Complete {
			break
		}
		_ = http.NewResponseController(w).Flush()
		if m, _, err = s.Await(r.Context(), id, sent, MaxAwait); err != nil || r.Context().Err() != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if following {
		setEnd(h, m) // the trailers
	}
	return nil
}

// setEnd sets what only a complete transfer has: its sum and row count.
func setEnd(h http.Header, m *Manifest) {
	h.Set("X-Content-Sha256", m.SHA256)
	h.Set("X-Row-Count", strconv.FormatInt(m.Rows, 10))
}

// copyBlock copies one block to w, checking its size and CRC-32C.
func (s *Store) copyBlock(w io.Writer, id string, b Block) error {
	f, _, err := s.OpenBlock(id, b.N)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(f, b.Size))
	if err != nil {
		return err
	}
	if got := crcHex(sum.Sum32()); n != b.Size || got != b.CRC32C {
		return &ChecksumError{Want: b.CRC32C, Got: got, WantSize: b.Size, GotSize: n}
	}
	return nil
}
