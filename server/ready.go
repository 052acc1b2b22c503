package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// readyTimeout bounds the database pings of one readiness check.
const readyTimeout = 2 * time.Second

// readyTTL is how long a check's answer is reused, so that several probes
// a second do not each ping every database.
const readyTTL = time.Second

// readiness caches the last check of the databases.
type readiness struct {
	mu     sync.Mutex // held during a check: concurrent probes wait for it
	at     time.Time
	failed map[string]error
}

// check pings every database, or returns the answer of a check less than
// readyTTL old.
func (r *readiness) check(ctx context.Context, engine *query.Engine) map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyTTL {
		return r.failed
	}
	// A probe that gives up must not leave its cancellation in the cache.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	r.failed = engine.PingEach(ctx)
	r.at = time.Now()
	return r.failed
}

// ready answers 200 when every database answers a ping and the server is
// not shutting down, else 503 saying which database failed and why (a
// cause safe to show: refused, DNS, TLS, authentication, too many
// connections, in recovery; the log has the addresses).
func (s *Server) ready(c *gin.Context) {
	if s.draining.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "shutting_down",
			"error": lakegate.NewErrorBody(lakegate.Errorf(lakegate.KindUnavailable, "the server is shutting down"))})
		return
	}
	failed := s.readiness.check(c.Request.Context(), s.engine)
	dbs := make(map[string]string, len(s.engine.Databases()))
	for _, db := range s.engine.Databases() {
		dbs[db.Name] = "ok"
		if err := failed[db.Name]; err != nil {
			dbs[db.Name] = lakegate.NewErrorBody(err).Message
		}
	}
	// Standbys are reported, never fatal: their reads fall back to the
	// primary.
	standbys := s.engine.StandbyStats()
	if len(failed) > 0 {
		// One database down: its own error, hint and all; more: how many.
		var err error = lakegate.Errorf(lakegate.KindUnavailable, "%d of %d databases do not answer", len(failed), len(dbs))
		if len(failed) == 1 {
			for _, e := range failed {
				err = e
			}
		}
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "databases": dbs, "standbys": standbys,
			"error": lakegate.NewErrorBody(err)})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "databases": dbs, "standbys": standbys})
}
