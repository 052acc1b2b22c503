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

// clusterState is a replica's place in its cluster, for /ready.
type clusterState struct {
	Replica string `json:"replica"`
	Joined  bool   `json:"joined"`
	// Reason says why a replica serves on its own.
	Reason string `json:"reason,omitempty"`
}

// joiner is the optional side of Replicas that says whether the replica
// is in its cluster (nil) or serves on its own, and why.
type joiner interface{ Joined() error }

// clusterState is nil for a single server.
func (s *Server) clusterState() *clusterState {
	if s.opts.Replicas == nil {
		return nil
	}
	st := &clusterState{Replica: s.opts.Replicas.Prefix(), Joined: true}
	if j, ok := s.opts.Replicas.(joiner); ok {
		if err := j.Joined(); err != nil {
			st.Joined, st.Reason = false, lakegate.NewErrorBody(err).Message
		}
	}
	return st
}

// ready answers 200 when every database answers a ping and the server is
// not shutting down, else 503 saying which database failed and why (a
// cause safe to show: refused, DNS, TLS, authentication, too many
// connections, in recovery; the log has the addresses). A replica whose
// cluster database does not answer is ready, serving on its own, and says
// so: when that database is down every replica is, and a fleet that all
// answered 503 would serve nobody.
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
	h := gin.H{"status": "ready", "databases": dbs, "standbys": standbys}
	if cl := s.clusterState(); cl != nil {
		h["cluster"] = cl
	}
	if len(failed) > 0 {
		// One database down: its own error, hint and all; more: how many.
		var err error = lakegate.Errorf(lakegate.KindUnavailable, "%d of %d databases do not answer", len(failed), len(dbs))
		if len(failed) == 1 {
			for _, e := range failed {
				err = e
			}
		}
		h["status"], h["error"] = "unavailable", lakegate.NewErrorBody(err)
		c.JSON(http.StatusServiceUnavailable, h)
		return
	}
	c.JSON(http.StatusOK, h)
}
