package server

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// serveRollups serves GET /admin/rollups: every configured rollup, whether
// it is built, and the builds running or done.
func (s *Server) serveRollups(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"rollups": s.engine.Rollups(c.Request.Context()), "builds": s.engine.RollupBuilds()})
}

// buildRollups serves POST /admin/rollups/build?database=&table=: it
// starts building the rollups of one table, of one database's tables, or
// of every database's (no parameter), and answers 202 at once with the
// builds started; GET /admin/rollups follows them.
func (s *Server) buildRollups(c *gin.Context) {
	db, table := c.Query("database"), c.Query("table")
	dbs := []string{db}
	if db == "" {
		dbs = nil
		for _, d := range s.engine.Databases() {
			dbs = append(dbs, d.Name)
		}
	}
	var builds []*query.RollupBuild
	for _, d := range dbs {
		b, err := s.engine.BuildRollups(d, table)
		if e, ok := errors.AsType[*lakegate.Error](err); ok && e.Kind == lakegate.KindNotFound && db == "" {
			continue // a database without rollups
		}
		if err != nil {
			fail(c, err)
			return
		}
		builds = append(builds, b...)
	}
	if len(builds) == 0 {
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no database has rollups configured",
			Hint: "declare them in a database's rollups setting (README, Rollups)"})
		return
	}
	adminAction(s.log, c, "build rollups", "database", db, "table", table)
	c.JSON(http.StatusAccepted, gin.H{"builds": builds})
}
