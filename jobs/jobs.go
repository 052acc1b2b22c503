// Package jobs runs long work for a subject apart from the call that
// asked for it: the call answers at once with a job id, and the subject
// follows the job (its progress, its end, its result) and may cancel it,
// from any session, until the job is forgotten. A job runs under its own
// timeout, not the caller's: a client's patience (a minute for most MCP
// clients) no longer bounds an export.
//
// A job belongs to its subject: to anyone else (but an admin) it does not
// exist. Its result is kept as long as the registry keeps ended jobs
// (Options.Keep); then it is expired, and after as long again forgotten.
// The registry holds no files: what a job writes (a block transfer) is
// its runner's, which must clean up after a failure or a cancel.
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/stack"
)

// State is where a job is.
type State string

// The states of a job: running until it ends done, failed or cancelled;
// an ended job's result expires after Options.Keep.
const (
	Running   State = "running"
	Done      State = "done"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	Expired   State = "expired"
)

// Defaults of Options.
const (
	DefaultTimeout     = config.DefaultJobTimeout
	DefaultKeep        = config.DefaultBlockTTL
	DefaultMaxPerOwner = config.DefaultJobsPerSubject
)

// maxEndedPerOwner bounds the ended jobs kept for one subject: past it
// the oldest are forgotten before their time, so that what the registry
// holds (each done job keeps its answer) is bounded whatever a subject
// starts.
const maxEndedPerOwner = 64

// Options tune a Registry; the zero value of each field is its default.
type Options struct {
	// Timeout bounds one job's run (job_timeout).
	Timeout time.Duration
	// Keep is how long an ended job keeps its result (then it is expired)
	// and how long again it is remembered (then it is forgotten).
	Keep time.Duration
	// MaxPerOwner bounds the jobs one subject has running at once.
	MaxPerOwner int
	// IDPrefix begins every job id (a replica's prefix, so that any
	// replica knows where a job runs); hex, at most 16 characters.
	IDPrefix string
}

// Run is a job's work: it runs until done or ctx ends (a cancel, the
// timeout, the registry closing), hands watch the Meter of its progress
// once it has one, and returns its result (what Status.Result shows once
// done) or its error. Calling watch again tells those waiting on the job
// (Wait) that its status has news worth an answer before its end: its
// transfer is named, and its first blocks readable.
type Run func(ctx context.Context, watch func(Meter)) (result any, err error)

// Status is a job as its owner sees it.
type Status struct {
	ID      string     `json:"job_id"`
	Owner   string     `json:"owner"`
	Tool    string     `json:"tool"`
	State   State      `json:"state"`
	Created time.Time  `json:"created"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Rows and Bytes are the work done so far (at the end: in all).
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Transfer is the block transfer the job writes, if it writes one
	// (its Meter is a TransferMeter): readable block by block as it runs.
	Transfer string `json:"transfer_id,omitempty"`
	// Error is why a job failed or was cancelled.
	Error *lakegate.ErrorBody `json:"error,omitempty"`
	// Result is what a done job produced, until it expires.
	Result any `json:"result,omitempty"`
	// Keep is how long the result is kept once the job ends.
	Keep time.Duration `json:"-"`
}

// job is one job; mu guards the fields after progress.
type job struct {
	id, owner, tool string
	created         time.Time
	cancel          context.CancelCauseFunc
	meter           atomic.Pointer[Meter]
	hidden          bool          // held, not yet shown (Hold); guarded by the registry's mu
	keep            time.Duration // how long its result is kept once it ends

	mu      sync.Mutex
	state   State
	ended   time.Time
	err     error
	result  any
	changed chan struct{} // closed when the job ends
	news    chan struct{} // closed (and replaced) when the run tells of news
	newsN   int           // the news told by the run
	told    int           // the news told by a status shown
}

// status is the job's status, shown to a caller: the news so far counts
// as told.
func (j *job) status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.told = j.newsN
	st := Status{ID: j.id, Owner: j.owner, Tool: j.tool, State: j.state, Created: j.created, Result: j.result, Keep: j.keep}
	if m := j.meter.Load(); m != nil {
		st.Rows, st.Bytes = (*m).Rows(), (*m).Bytes()
		if tm, ok := (*m).(TransferMeter); ok {
			st.Transfer = tm.Transfer()
		}
	}
	if !j.ended.IsZero() {
		ended := j.ended
		st.Ended = &ended
	}
	if j.err != nil {
		body := lakegate.NewErrorBody(j.err)
		st.Error = &body
	}
	return st
}

// Registry runs and remembers jobs. Safe for concurrent use.
type Registry struct {
	opts Options

	mu     sync.Mutex
	jobs   map[string]*job
	closed bool
	wg     sync.WaitGroup // the running jobs
}

// New makes a registry.
func New(o Options) (*Registry, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.MaxPerOwner <= 0 {
		o.MaxPerOwner = DefaultMaxPerOwner
	}
	if len(o.IDPrefix) > 16 || strings.Trim(o.IDPrefix, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("jobs: id prefix %q: want at most 16 lower-case hex digits", o.IDPrefix)
	}
	return &Registry{opts: o, jobs: map[string]*job{}}, nil
}

// Timeout is the bound of one job's run.
func (r *Registry) Timeout() time.Duration { return r.opts.Timeout }

// errClosed is Start's answer once the registry is closing.
var errClosed = lakegate.ErrShuttingDown

// Start runs run as a job of owner's, named for tool, and returns at once
// with its status. Past MaxPerOwner running jobs it fails with a
// rate_limited error. The job's context keeps ctx's values (the caller,
// the trace) but not its end: it outlives the caller's request or session
// and ends with a cancel, the timeout, or Close.
func (r *Registry) Start(ctx context.Context, owner, tool string, run Run) (Status, error) {
	return r.StartKeep(ctx, owner, tool, 0, run)
}

// StartKeep is Start for a job whose result is kept for keep once it
// ends, when that is shorter than Options.Keep (0: Options.Keep): a
// client that asks for less (a task's ttl) gets less.
func (r *Registry) StartKeep(ctx context.Context, owner, tool string, keep time.Duration, run Run) (Status, error) {
	j, err := r.start(ctx, owner, tool, run, false, keep)
	if err != nil {
		return Status{}, err
	}
	return j.status(), nil
}

// Hold runs run as a job of owner's that no one sees until it has run for
// after: a run that ends sooner answers as a call would (its result and
// error; the job is forgotten, never shown), and ctx ending first cancels
// it, since until then it is the caller's call. A run still going after
// that long is shown, and Hold returns its status with shown true, as
// Start would have. A held job becomes a job even past MaxPerOwner: it
// already runs, on the worker its call took.
func (r *Registry) Hold(ctx context.Context, owner, tool string, after time.Duration, run Run) (result any, st Status, shown bool, err error) {
	j, err := r.start(ctx, owner, tool, run, true, 0)
	if err != nil {
		return nil, Status{}, false, err
	}
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-j.changed:
	case <-ctx.Done():
		j.cancel(context.Cause(ctx))
		<-j.changed
	case <-t.C:
		r.mu.Lock()
		r.tidyLocked(owner, time.Now().UTC())
		j.hidden = false
		r.mu.Unlock()
		return nil, j.status(), true, nil
	}
	r.mu.Lock()
	delete(r.jobs, j.id)
	r.mu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state == Done {
		return j.result, Status{}, false, nil
	}
	return nil, Status{}, false, j.err
}

// start registers and runs a job, whose result is kept for keep (at most
// Options.Keep; 0: that); a hidden one neither counts against MaxPerOwner
// nor is found until shown.
func (r *Registry) start(ctx context.Context, owner, tool string, run Run, hidden bool, keep time.Duration) (*job, error) {
	if keep <= 0 || keep > r.opts.Keep {
		keep = r.opts.Keep
	}
	now := time.Now().UTC()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errClosed
	}
	// A held job is the caller's call until shown: it neither sweeps (a
	// call's cost stays flat) nor counts.
	if !hidden {
		if err := r.admitLocked(owner, now); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	ctx, stop := context.WithTimeoutCause(ctx, r.opts.Timeout, errTimeout(r.opts.Timeout))
	j := &job{id: r.newID(), owner: owner, tool: tool, created: now, cancel: cancel, hidden: hidden, keep: keep,
		state: Running, changed: make(chan struct{}), news: make(chan struct{})}
	r.jobs[j.id] = j
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		stack.Grow()
		defer r.wg.Done()
		defer stop()
		result, err := run(ctx, j.watch)
		if err == nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		j.end(result, err, context.Cause(ctx))
	}()
	return j, nil
}

// admitLocked refuses a job past MaxPerOwner running ones of owner's,
// after tidyLocked. r.mu is held.
func (r *Registry) admitLocked(owner string, now time.Time) error {
	if running := r.tidyLocked(owner, now); running >= r.opts.MaxPerOwner {
		return &lakegate.Error{Kind: lakegate.KindRateLimited,
			Message: fmt.Sprintf("%d jobs of yours are running, the most at once", running),
			Hint:    "wait for one to end (job_status) or cancel one (cancel_job)", RetryAfter: 5 * time.Second}
	}
	return nil
}

// tidyLocked sweeps, forgets owner's oldest ended jobs past the bound,
// room kept for one more, and counts owner's running jobs. r.mu is held.
func (r *Registry) tidyLocked(owner string, now time.Time) (running int) {
	r.sweepLocked(now)
	var ended []*job
	for _, j := range r.jobs {
		if j.owner != owner || j.hidden {
			continue
		}
		if j.running() {
			running++
		} else {
			ended = append(ended, j)
		}
	}
	if len(ended) >= maxEndedPerOwner {
		slices.SortFunc(ended, func(a, b *job) int { return a.created.Compare(b.created) })
		for _, j := range ended[:len(ended)-maxEndedPerOwner+1] {
			delete(r.jobs, j.id)
		}
	}
	return running
}

// errTimeout is the cause of a job stopped by its timeout.
func errTimeout(d time.Duration) error {
	return &lakegate.Error{Kind: lakegate.KindTimeout, Message: fmt.Sprintf("the job ran past its timeout (%v)", d),
		Hint: "narrow the query, or ask an operator for a longer job_timeout"}
}

// errCancelled is the cause of a job cancelled by its owner.
var errCancelled = &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the job was cancelled"}

// running is whether the job has not ended.
func (j *job) running() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state == Running
}

// watch keeps m as the job's Meter; from the second call on, it wakes
// those waiting for news.
func (j *job) watch(m Meter) {
	if j.meter.Swap(&m) == nil {
		return
	}
	j.mu.Lock()
	close(j.news)
	j.news = make(chan struct{})
	j.newsN++
	j.mu.Unlock()
}

// end records how the job ended: cancelled when its owner cancelled it,
// else done or failed.
func (j *job) end(result any, err, cause error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ended = time.Now().UTC()
	switch {
	case errors.Is(cause, errCancelled):
		j.state, j.err = Cancelled, errCancelled
	case err != nil:
		j.state, j.err = Failed, err
	default:
		j.state, j.result = Done, result
	}
	close(j.changed)
}

func (r *Registry) newID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	return r.opts.IDPrefix + id[len(r.opts.IDPrefix):]
}

// sweepLocked expires the results of jobs ended Keep ago and forgets
// those ended twice as long ago. r.mu is held.
func (r *Registry) sweepLocked(now time.Time) {
	for id, j := range r.jobs {
		j.mu.Lock()
		switch {
		case j.state == Running:
		case now.Sub(j.ended) >= 2*j.keep:
			delete(r.jobs, id)
		case now.Sub(j.ended) >= j.keep && j.state != Expired:
			j.state, j.result = Expired, nil
		}
		j.mu.Unlock()
	}
}

// errNotFound is the answer for a job that does not exist, or is
// another subject's.
func errNotFound(id string) error {
	if len(id) > 40 {
		id = id[:40] + "…"
	}
	return &lakegate.Error{Kind: lakegate.KindNotFound, Message: fmt.Sprintf("no job %q", id),
		Hint: "job ids come from the call that started the job; a job is forgotten some time after it ends"}
}

// lookup is job id as c may see it: its own, or any for an admin.
func (r *Registry) lookup(c lakegate.Caller, id string) (*job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked(time.Now().UTC())
	j, ok := r.jobs[id]
	if !ok || j.hidden || (j.owner != c.Subject && !c.HasRole(lakegate.RoleAdmin)) {
		return nil, errNotFound(id)
	}
	return j, nil
}

// Get is job id's status, for its owner (or an admin).
func (r *Registry) Get(c lakegate.Caller, id string) (Status, error) {
	j, err := r.lookup(c, id)
	if err != nil {
		return Status{}, err
	}
	return j.status(), nil
}

// Wait is Get once job id has ended or told of news (its transfer named)
// that no status shown has told yet, or once wait has passed, or ctx
// ended, whichever comes first: a caller polls rarely and learns of the
// end, or of blocks to fetch, at once.
func (r *Registry) Wait(ctx context.Context, c lakegate.Caller, id string, wait time.Duration) (Status, error) {
	j, err := r.lookup(c, id)
	if err != nil {
		return Status{}, err
	}
	j.mu.Lock()
	news, untold := j.news, j.told < j.newsN
	j.mu.Unlock()
	if untold {
		return j.status(), nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-j.changed:
	case <-news:
	case <-t.C:
	case <-ctx.Done():
	}
	return j.status(), nil
}

// Cancel stops job id for its owner (or an admin) and returns its status
// once it has ended; a job that had ended is left as it was.
func (r *Registry) Cancel(ctx context.Context, c lakegate.Caller, id string) (Status, error) {
	j, err := r.lookup(c, id)
	if err != nil {
		return Status{}, err
	}
	j.cancel(errCancelled)
	select {
	case <-j.changed:
	case <-ctx.Done():
	}
	return j.status(), nil
}

// List is c's jobs (an admin's: everyone's), newest first.
func (r *Registry) List(c lakegate.Caller) []Status {
	r.mu.Lock()
	r.sweepLocked(time.Now().UTC())
	var js []*job
	for _, j := range r.jobs {
		if !j.hidden && (j.owner == c.Subject || c.HasRole(lakegate.RoleAdmin)) {
			js = append(js, j)
		}
	}
	r.mu.Unlock()
	out := make([]Status, len(js))
	for i, j := range js {
		out[i] = j.status()
	}
	slices.SortFunc(out, func(a, b Status) int { return b.Created.Compare(a.Created) })
	return out
}

// Close stops taking jobs, cancels the running ones and waits for them
// to end, within ctx.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	for _, j := range r.jobs {
		j.cancel(lakegate.ErrShuttingDown)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jobs: close: %w", ctx.Err())
	}
}
