package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
)

// A request's body: capped for every route (limitBody), read whole within
// read_timeout before a worker is taken (readBody), decoded strictly
// (decodeJSON), or left unread when the answer does not need it (dropBody).

// limitBody caps every request body at max bytes.
func limitBody(max int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, max)
		}
		c.Next()
	}
}

// readBody reads the request body into memory (bounded by max_body_bytes)
// within timeout and puts it back as the body.
func readBody(c *gin.Context, timeout time.Duration) error {
	if c.Request.Body == nil || c.Request.Body == http.NoBody {
		return nil
	}
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	data, err := io.ReadAll(c.Request.Body)
	// Close while the deadline holds: after a failed read it would wait
	// for the rest of the body.
	c.Request.Body.Close()
	_ = rc.SetReadDeadline(time.Time{})
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return err // rendered as 413
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.Header("Connection", "close") // never wait for the rest
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: fmt.Sprintf("the request body did not arrive within %s", timeout),
			Hint: "read_timeout bounds sending a whole request"}
	case err != nil:
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "reading the request body failed", Err: err}
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(data))
	return nil
}

// decodeJSON reads one JSON object strictly into v.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "request body: " + strings.TrimPrefix(err.Error(), "json: "),
			Hint: "send one JSON object"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &lakegate.Error{Kind: lakegate.KindValidation, Message: "request body: unexpected data after the JSON object",
			Hint: "send one JSON object"}
	}
	return nil
}

// dropBody is for answers given without reading the request's body (an
// unauthenticated request, an unknown route): net/http would otherwise
// wait for the body, up to read_timeout, to keep the connection. The
// connection closes after the answer instead, and the wait ends at once.
func dropBody(c *gin.Context) {
	if c.Request.ContentLength == 0 {
		return
	}
	c.Header("Connection", "close")
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
}
