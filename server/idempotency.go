package server

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// Headers of idempotent ingest (the names Stripe and the IETF
// httpapi-idempotency-key draft use).
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// idempotencyKey returns the request's Idempotency-Key, "" when there is
// none. The draft's quoted form ("...") is accepted too.
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values(headerIdempotencyKey)
	if len(vals) == 0 {
		return "", nil
	}
	key := strings.TrimSpace(vals[0])
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if len(vals) > 1 || !query.ValidKey(key) {
		return "", &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("%s must be one value of 1 to %d characters: letters, digits and - _ . : ~ + / =", headerIdempotencyKey, query.MaxKeyLen),
			Hint:    "use a new UUID per batch, and the same one when retrying it"}
	}
	return key, nil
}

// ingestOnce inserts the rows read from body under key: the body's
// SHA-256 tells a retry from another batch under the same key. A retry
// answers the first answer, marked with Idempotent-Replayed: true.
func (s *Server) ingestOnce(c *gin.Context, key string) {
	h := sha256.New()
	body := io.TeeReader(c.Request.Body, h)
	rows, err := readRows(body)
	if err != nil {
		fail(c, err)
		return
	}
	// readRows reads to the end of the body; make sure the hash covers
	// every byte whatever it left.
	if _, err := io.Copy(io.Discard, body); err != nil {
		fail(c, err)
		return
	}
	res, err := s.engine.InsertOnce(c.Request.Context(), caller(c), c.Param("db"), c.Param("table"), rows,
		query.Idempotency{Key: key, BodyHash: h.Sum(nil)})
	if err != nil {
		fail(c, err)
		return
	}
	if res.Replayed {
		c.Header(headerReplayed, "true")
	}
	c.JSON(http.StatusOK, res)
}
