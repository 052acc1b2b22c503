package blocktransport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
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
// encoding, and its SHA-256 (X-Content-Sha256) and row count
// (X-Row-Count). A transfer still being written is followed: each block
// goes out as soon as it is sealed. What is known only at the end (the row
// count of a transfer being written, the SHA-256 of a transfer no reader
// has read whole, computed as it is sent and then kept) comes as trailers.
// Each block is checked against its CRC-32C as it is sent. A response that
// cannot end whole (a damaged block, a transfer aborted or expired before
// its end, a request ended) is cut off, with no clean end, so a client
// never takes part of a result for all of it.
func (s *Store) ServeAll(w http.ResponseWriter, r *http.Request, id string) error {
	m, _, err := s.Lookup(id)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", MIMEType(m.Format))
	h.Set("Cache-Control", "private, no-store")
	var whole hash.Hash // the SHA-256, when it is to be computed
	var trailers []string
	if m.SHA256 == "" {
		whole = sha256.New()
		trailers = append(trailers, "X-Content-Sha256")
	} else {
		h.Set("X-Content-Sha256", m.SHA256)
	}
	following := !m.Complete
	if following {
		trailers = append(trailers, "X-Row-Count")
	} else {
		h.Set("X-Row-Count", strconv.FormatInt(m.Rows, 10))
	}
	if trailers != nil {
		h.Set("Trailer", strings.Join(trailers, ", "))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	sent := 0
	for {
		for _, b := range m.Blocks[sent:] {
			if err := s.copyBlock(w, id, b, whole); err != nil {
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
	if whole != nil {
		sum := hex.EncodeToString(whole.Sum(nil))
		s.setSum(id, sum)
		h.Set("X-Content-Sha256", sum) // a trailer
	}
	if following {
		h.Set("X-Row-Count", strconv.FormatInt(m.Rows, 10)) // a trailer
	}
	return nil
}

// copyBlock copies one block to w, and to also when it is not nil,
// checking its size and CRC-32C.
func (s *Store) copyBlock(w io.Writer, id string, b Block, also io.Writer) error {
	f, _, err := s.OpenBlock(id, b.N)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := crc32.New(castagnoli)
	to := io.MultiWriter(w, sum)
	if also != nil {
		to = io.MultiWriter(w, sum, also)
	}
	n, err := io.Copy(to, io.LimitReader(f, b.Size))
	if err != nil {
		return err
	}
	if got := crcHex(sum.Sum32()); n != b.Size || got != b.CRC32C {
		return &ChecksumError{Want: b.CRC32C, Got: got, WantSize: b.Size, GotSize: n}
	}
	return nil
}
