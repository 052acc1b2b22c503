package server

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

// The console's overview (GET /console/api/overview) is one replica's
// figures or, in a cluster, the cluster's: the figures of every replica
// that answered, added up where a sum means something (sessions, workers,
// pools, the block store, tool calls and their latency histograms), and
// each replica's own beside them (Replicas), since a sum hides one
// replica at its limit. Behind a round-robin balancer each refresh lands
// on another replica: the cluster's view is the same whichever answers,
// and a replica's view (?replica=PREFIX) is forwarded to that replica.

// overview is the console's overview page.
type overview struct {
	Now time.Time `json:"now"`
	// Replica is the replica these figures are of, in a cluster; empty
	// in the cluster's view and on a single server.
	Replica string `json:"replica,omitempty"`
	// Replicas are, in the cluster's view, the replicas that answered,
	// by prefix, each with its own figures.
	Replicas  []replicaFigures  `json:"replicas,omitempty"`
	MCP       mcpState          `json:"mcp"`
	Sessions  sessionCounts     `json:"sessions"`
	Workers   host.WorkerStatus `json:"workers"`
	Databases []databaseState   `json:"databases"`
	Blocks    *host.BlockStatus `json:"blocks"`
	History   HistoryView       `json:"history"`
}

type mcpState struct {
	Enabled bool       `json:"enabled"`
	Since   *time.Time `json:"since,omitempty"`
}

type sessionCounts struct {
	SSE        int `json:"sse"`
	Streamable int `json:"streamable"`
	Stdio      int `json:"stdio"`
	// Active and Idle divide the SSE and Streamable HTTP sessions
	// (sessionIdle); IdleAfterS is mcp_session_idle_after in seconds.
	Active     int               `json:"active"`
	Idle       int               `json:"idle"`
	IdleAfterS float64           `json:"idle_after_s"`
	BySubject  []subjectSessions `json:"by_subject"`
}

type subjectSessions struct {
	Subject    string `json:"subject"`
	SSE        int    `json:"sse"`
	Streamable int    `json:"streamable"`
	Idle       int    `json:"idle"`
}

type databaseState struct {
	Name    string        `json:"name"`
	Dialect query.Dialect `json:"dialect"`
	// Circuit is the circuit breaker's state; in the cluster's view the
	// worst of the replicas', and Circuits counts the replicas in each.
	Circuit  string         `json:"circuit"`
	Circuits map[string]int `json:"circuits,omitempty"`
	// Unavailable says why the database is not served now (not connected
	// since start, or its circuit open); empty while it is. In the
	// cluster's view, the first replica's that says so, and on how many.
	Unavailable string     `json:"unavailable,omitempty"`
	Pool        *poolState `json:"pool,omitempty"` // PostgreSQL only
}

type poolState struct {
	Acquired int32 `json:"acquired"`
	Idle     int32 `json:"idle"`
	Total    int32 `json:"total"`
	Max      int32 `json:"max"`
}

// replicaFigures are one replica's own figures in the cluster's view.
type replicaFigures struct {
	Replica    string `json:"replica"`
	MCPEnabled bool   `json:"mcp_enabled"`
	// Sessions counts its open sessions (SSE, Streamable HTTP and stdio),
	// IdleSessions those of them that are idle.
	Sessions     int               `json:"sessions"`
	IdleSessions int               `json:"idle_sessions"`
	Workers      host.WorkerStatus `json:"workers"`
	// Calls and Errors count its tool calls over the charts' hour.
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
	// OpenCircuits name the databases whose circuit is not closed there,
	// Unavailable those it does not serve now.
	OpenCircuits []string `json:"open_circuits,omitempty"`
	Unavailable  []string `json:"unavailable,omitempty"`
}

// sessionIdle reports whether si is idle at now: no tool call of it in
// progress, and its last activity at least after old.
func sessionIdle(si host.SessionInfo, now time.Time, after time.Duration) bool {
	return si.Running == 0 && now.Sub(si.LastActive) >= after
}

// countSessions counts sessions, idle at now after after, into n; by
// subject only those mine accepts.
func countSessions(n *sessionCounts, sessions []host.SessionInfo, now time.Time, after time.Duration, mine func(subject string) bool) {
	at := map[string]int{} // subject → index in BySubject
	for _, si := range sessions {
		idle := sessionIdle(si, now, after)
		if si.Transport == "sse" {
			n.SSE++
		} else {
			n.Streamable++
		}
		if idle {
			n.Idle++
		} else {
			n.Active++
		}
		if !mine(si.Subject) {
			continue
		}
		i, ok := at[si.Subject]
		if !ok {
			i = len(n.BySubject)
			at[si.Subject] = i
			n.BySubject = append(n.BySubject, subjectSessions{Subject: si.Subject})
		}
		s := &n.BySubject[i]
		if si.Transport == "sse" {
			s.SSE++
		} else {
			s.Streamable++
		}
		if idle {
			s.Idle++
		}
	}
}

// replicasOf counts the replicas that reported d, in the cluster's view.
func replicasOf(d *databaseState) (n int) {
	for _, c := range d.Circuits {
		n += c
	}
	return n
}

// circuitRank orders circuit states from best to worst (an unknown one
// first).
func circuitRank(state string) int {
	switch query.BreakerState(state) {
	case query.BreakerClosed:
		return 1
	case query.BreakerHalfOpen:
		return 2
	case query.BreakerOpen:
		return 3
	}
	return 0
}

// mergeOverviews is the cluster's view at now of its replicas' own
// overviews (each with its history's buckets).
func mergeOverviews(now time.Time, parts []overview) overview {
	slices.SortFunc(parts, func(a, b overview) int { return cmp.Compare(a.Replica, b.Replica) })
	ov := overview{Now: now, Replicas: make([]replicaFigures, 0, len(parts)), MCP: mcpState{Enabled: len(parts) > 0},
		Sessions: sessionCounts{BySubject: []subjectSessions{}}, Databases: []databaseState{}}
	subjects := map[string]int{}    // subject → index in BySubject
	databases := map[string]int{}   // name → index in Databases
	unavailable := map[string]int{} // name → replicas that do not serve it
	histories := make([]HistoryView, 0, len(parts))
	for _, p := range parts {
		// On only when on everywhere: the switch is the cluster's, and a
		// replica that has not followed it yet shows.
		ov.MCP.Enabled = ov.MCP.Enabled && p.MCP.Enabled
		if p.MCP.Since != nil && (ov.MCP.Since == nil || p.MCP.Since.After(*ov.MCP.Since)) {
			ov.MCP.Since = p.MCP.Since
		}

		s := &ov.Sessions
		s.SSE += p.Sessions.SSE
		s.Streamable += p.Sessions.Streamable
		s.Stdio += p.Sessions.Stdio
		s.Active += p.Sessions.Active
		s.Idle += p.Sessions.Idle
		s.IdleAfterS = max(s.IdleAfterS, p.Sessions.IdleAfterS)
		for _, n := range p.Sessions.BySubject {
			i, ok := subjects[n.Subject]
			if !ok {
				i = len(s.BySubject)
				subjects[n.Subject] = i
				s.BySubject = append(s.BySubject, subjectSessions{Subject: n.Subject})
			}
			s.BySubject[i].SSE += n.SSE
			s.BySubject[i].Streamable += n.Streamable
			s.BySubject[i].Idle += n.Idle
		}

		w := &ov.Workers
		w.Max += p.Workers.Max
		w.InUse += p.Workers.InUse
		w.Waiting += p.Workers.Waiting
		w.PoolMax += p.Workers.PoolMax
		w.PoolInUse += p.Workers.PoolInUse

		fig := replicaFigures{Replica: p.Replica, MCPEnabled: p.MCP.Enabled, Workers: p.Workers,
			Sessions: p.Sessions.SSE + p.Sessions.Streamable + p.Sessions.Stdio, IdleSessions: p.Sessions.Idle}
		for _, db := range p.Databases {
			i, ok := databases[db.Name]
			if !ok {
				i = len(ov.Databases)
				databases[db.Name] = i
				ov.Databases = append(ov.Databases, databaseState{Name: db.Name, Dialect: db.Dialect, Circuits: map[string]int{}})
			}
			d := &ov.Databases[i]
			d.Circuits[db.Circuit]++
			if circuitRank(db.Circuit) > circuitRank(d.Circuit) {
				d.Circuit = db.Circuit
			}
			if db.Circuit != string(query.BreakerClosed) {
				fig.OpenCircuits = append(fig.OpenCircuits, db.Name)
			}
			if db.Unavailable != "" {
				fig.Unavailable = append(fig.Unavailable, db.Name)
				unavailable[db.Name]++
				if d.Unavailable == "" {
					d.Unavailable = db.Unavailable
				}
			}
			if db.Pool != nil {
				if d.Pool == nil {
					d.Pool = &poolState{}
				}
				d.Pool.Acquired += db.Pool.Acquired
				d.Pool.Idle += db.Pool.Idle
				d.Pool.Total += db.Pool.Total
				d.Pool.Max += db.Pool.Max
			}
		}

		if b := p.Blocks; b != nil {
			if ov.Blocks == nil {
				ov.Blocks = &host.BlockStatus{}
			}
			ov.Blocks.Transfers += b.Transfers
			ov.Blocks.Blocks += b.Blocks
			ov.Blocks.Bytes += b.Bytes
			ov.Blocks.StoredNow += b.StoredNow
			ov.Blocks.StoredBytesNow += b.StoredBytesNow
		}

		for i := range p.History.All.Calls {
			fig.Calls += p.History.All.Calls[i]
			if i < len(p.History.All.Errors) {
				fig.Errors += p.History.All.Errors[i]
			}
		}
		histories = append(histories, p.History)
		ov.Replicas = append(ov.Replicas, fig)
	}
	for i := range ov.Databases {
		d := &ov.Databases[i]
		if n, all := unavailable[d.Name], replicasOf(d); n > 0 && n < all {
			d.Unavailable = fmt.Sprintf("on %d of %d replicas: %s", n, all, d.Unavailable)
		}
	}
	slices.SortFunc(ov.Sessions.BySubject, func(a, b subjectSessions) int { return cmp.Compare(a.Subject, b.Subject) })
	ov.History = mergeHistories(now, histories)
	return ov
}
