package mcp

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/jobs"
	"github.com/lakegate/lakegate/mcp/internal/route"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// JobsPath is where the jobs' HTTP routes are mounted, under /mcp: a
// caller's jobs, one job (?wait=25s waits for its end), and DELETE to
// cancel one. In a cluster a job's routes are forwarded to the replica
// that runs it, whichever replica is asked.
const JobsPath = "/jobs"

// maxJobWait bounds ?wait= on a job's route, as job_status's wait_s.
const maxJobWait = 25 * time.Second

// jobRoutes serves the jobs over HTTP; registry nil: the server runs no
// jobs (every route answers not_found).
type jobRoutes struct {
	registry *jobs.Registry
	peers    host.Peers // nil: a single server
}

func (j *jobRoutes) mount(g gin.IRouter, meter gin.HandlerFunc) {
	g.GET(JobsPath, meter, j.list)
	g.GET(JobsPath+"/:id", meter, j.get)
	g.DELETE(JobsPath+"/:id", meter, j.cancel)
}

func (j *jobRoutes) list(c *gin.Context) {
	if j.registry == nil {
		route.Fail(c, wire.ErrNoJobs)
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	list := j.registry.List(caller)
	for i := range list {
		list[i].Result = nil // a job's own route has it: the list stays small
	}
	c.JSON(http.StatusOK, gin.H{"jobs": list})
}

// local is the job id of a route this replica answers: false when the
// request went on to the replica that runs the job, or was answered that
// there are no jobs here.
func (j *jobRoutes) local(c *gin.Context) (id string, ok bool) {
	id = c.Param("id")
	if route.Forward(j.peers, c, id) {
		return "", false
	}
	if j.registry == nil {
		route.Fail(c, wire.ErrNoJobs)
		return "", false
	}
	return id, true
}

func (j *jobRoutes) get(c *gin.Context) {
	id, ok := j.local(c)
	if !ok {
		return
	}
	var wait time.Duration
	if v := c.Query("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			if s, serr := strconv.ParseFloat(v, 64); serr == nil {
				d, err = time.Duration(s*float64(time.Second)), nil
			}
		}
		if err != nil || d < 0 {
			route.Fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "wait " + strconv.Quote(v) + " is not a duration",
				Hint: "a duration like 25s (at most 25s), or seconds"})
			return
		}
		wait = min(d, maxJobWait)
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	st, err := j.registry.Wait(c.Request.Context(), caller, id, wait)
	if err != nil {
		route.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

func (j *jobRoutes) cancel(c *gin.Context) {
	id, ok := j.local(c)
	if !ok {
		return
	}
	caller, _ := lakegate.CallerFrom(c.Request.Context())
	st, err := j.registry.Cancel(c.Request.Context(), caller, id)
	if err != nil {
		route.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// remoteJob reads job id from the replica that runs it, waiting up to
// wait for its end (the job_status tool on a session of another
// replica), or cancels it there (cancel_job); ok is false for a job of
// this replica's, or a single server.
func (j *jobRoutes) remoteJob(blocks *blockRoutes) func(ctx context.Context, c lakegate.Caller, id string, wait time.Duration, cancel bool) (jobs.Status, bool, error) {
	return func(ctx context.Context, c lakegate.Caller, id string, wait time.Duration, cancel bool) (jobs.Status, bool, error) {
		if j.peers == nil || strings.HasPrefix(id, j.peers.Prefix()) {
			return jobs.Status{}, false, nil
		}
		method, path := http.MethodGet, "/mcp"+JobsPath+"/"+id+"?wait="+wait.String()
		if cancel {
			method, path = http.MethodDelete, "/mcp"+JobsPath+"/"+id
		}
		var st jobs.Status
		_, err := blocks.send(ctx, c, method, id, path, maxManifestBytes, &st)
		return st, true, err
	}
}

// infos lists the jobs c may see, for the host's console (no results).
func (j *jobRoutes) infos(c lakegate.Caller) []host.JobInfo {
	if j.registry == nil {
		return nil
	}
	list := j.registry.List(c)
	out := make([]host.JobInfo, len(list))
	for i, st := range list {
		out[i] = host.JobInfo{ID: st.ID, Owner: st.Owner, Tool: st.Tool, State: string(st.State), Created: st.Created, Ended: st.Ended,
			Rows: st.Rows, Bytes: st.Bytes, Transfer: st.Transfer}
		if st.Error != nil {
			out[i].Error = st.Error.Message
		}
	}
	return out
}
