package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/wire"
	"github.com/lakegate/lakegate/query"
)

// A tail as a resource: lakegate://watch/{database}/{table}, with the
// tail's columns, filters and order in its query (columns=a,b,
// order_by=id, filters=<JSON array>). resources/read answers what a tail
// without a cursor would (the newest rows); resources/subscribe follows
// it, and each time rows arrive that its filters keep, the subscribed
// sessions get notifications/resources/updated (protocol revisions
// before 2026-07-28). A subscription is one loop of waiting tails (they
// hold no worker while they wait), one per resource and subject, ended
// when its last session unsubscribes or closes.

// watchTemplate is the watch resources' URI template.
const watchTemplate = "lakegate://watch/{database}/{table}"

// watchRows bounds the rows resources/read of a watch answers.
const watchRows = 20

// tailEngine is the engine's tail (query.Engine has it).
type tailEngine interface {
	PrepareTail(ctx context.Context, c lakegate.Caller, r query.TailRequest) (*query.Stmt, error)
}

// parseWatchURI reads a watch resource's URI as a tail request.
func parseWatchURI(uri string) (query.TailRequest, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "lakegate" || u.Host != "watch" {
		return query.TailRequest{}, false
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 2 {
		return query.TailRequest{}, false
	}
	db, err1 := url.PathUnescape(parts[0])
	table, err2 := url.PathUnescape(parts[1])
	if err1 != nil || err2 != nil || db == "" || table == "" {
		return query.TailRequest{}, false
	}
	r := query.TailRequest{Database: db, Table: table}
	q := u.Query()
	for _, c := range splitList(q.Get("columns")) {
		r.Columns = append(r.Columns, query.Select{Column: c})
	}
	r.OrderBy = splitList(q.Get("order_by"))
	if f := q.Get("filters"); f != "" && json.Unmarshal([]byte(f), &r.Filters) != nil {
		return query.TailRequest{}, false
	}
	return r, true
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// subscriptions are the followed watch resources.
type subscriptions struct {
	engine tailEngine
	admit  func(context.Context) (func(), error)
	log    *slog.Logger
	chars  int // the answer budget, which a read fits

	mu     sync.Mutex
	subs   map[subKey]*subscription
	closed bool
	wg     sync.WaitGroup
	// notified counts the notifications/resources/updated sent.
	notified atomic.Uint64
}

// status counts the open subscriptions and the notifications sent.
func (s *subscriptions) status() host.SubscriptionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return host.SubscriptionStatus{Open: len(s.subs), Notifications: s.notified.Load()}
}

// subKey is one subject's subscription to one resource of one server.
type subKey struct {
	server       *mcpsdk.Server
	uri, subject string
}

type subscription struct {
	sessions map[*mcpsdk.ServerSession]bool
	ctx      context.Context // ends with the subscription
	cancel   context.CancelFunc
}

// read answers resources/read of a watch: the newest rows, as JSON.
func (s *subscriptions) read(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	uri := req.Params.URI
	r, ok := parseWatchURI(uri)
	if !ok || s.engine == nil {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	r.Limit = watchRows
	release, err := s.admit(ctx)
	if err != nil {
		return nil, wire.ResourceErr("watch", uri, err)
	}
	defer release()
	st, err := s.engine.PrepareTail(ctx, caller, r)
	if err != nil {
		return nil, wire.ResourceErr("watch", uri, err)
	}
	// Within the answer budget (half of it for the cells: JSON adds its
	// quotes and brackets); wider rows are refused with a hint.
	res, rows, err := query.Collect(ctx, st, int64(s.chars/2))
	if err != nil {
		var le *lakegate.Error
		if errors.As(err, &le) && le.Kind == lakegate.KindValidation {
			e := *le
			e.Hint = "name fewer columns (columns=a,b in the URI), or call the tail tool, which cuts its answer to the budget"
			err = &e
		}
		return nil, wire.ResourceErr("watch", uri, err)
	}
	return jsonResource(uri, map[string]any{"columns": res.Columns, "rows": rows, "next_cursor": res.NextCursor})
}

// subscribe starts following a watch resource for the request's session
// (go-sdk's SubscribeHandler for server): the request is checked as the caller's
// tail first, so that a refused one is refused at once.
func (s *subscriptions) subscribe(ctx context.Context, server *mcpsdk.Server, req *mcpsdk.SubscribeRequest) error {
	uri := req.Params.URI
	r, ok := parseWatchURI(uri)
	if !ok || s.engine == nil {
		return mcpsdk.ResourceNotFoundError(uri)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	r.Limit = 1
	release, err := s.admit(ctx)
	if err != nil {
		return wire.ResourceErr("watch", uri, err)
	}
	st, err := s.engine.PrepareTail(ctx, caller, r)
	var res *query.Result
	if err == nil {
		res, _, err = query.Collect(ctx, st, 1<<20)
	}
	release()
	if err != nil {
		return wire.ResourceErr("watch", uri, err)
	}
	key := subKey{server, uri, caller.Subject}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lakegate.ErrShuttingDown
	}
	if s.subs == nil {
		s.subs = map[subKey]*subscription{}
	}
	sub := s.subs[key]
	if sub == nil {
		subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sub = &subscription{sessions: map[*mcpsdk.ServerSession]bool{}, ctx: subCtx, cancel: cancel}
		s.subs[key] = sub
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.follow(subCtx, key, caller, r, res.NextCursor)
		}()
	}
	if !sub.sessions[req.Session] {
		sub.sessions[req.Session] = true
		// Its session's end ends its part.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			select {
			case <-waitSession(req.Session):
				s.leave(key, req.Session, sub)
			case <-sub.ctx.Done():
			}
		}()
	}
	return nil
}

// unsubscribe is go-sdk's UnsubscribeHandler for server.
func (s *subscriptions) unsubscribe(ctx context.Context, server *mcpsdk.Server, req *mcpsdk.UnsubscribeRequest) error {
	caller, _ := lakegate.CallerFrom(ctx)
	s.leave(subKey{server, req.Params.URI, caller.Subject}, req.Session, nil)
	return nil
}

// leave removes session from key's subscription (only if it is still
// only, when only is not nil), ending it with its last.
func (s *subscriptions) leave(key subKey, session *mcpsdk.ServerSession, only *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subs[key]
	if sub == nil || !sub.sessions[session] || only != nil && sub != only {
		return
	}
	delete(sub.sessions, session)
	if len(sub.sessions) == 0 {
		sub.cancel()
		delete(s.subs, key)
	}
}

// follow waits on the tail of r from cursor, as caller, and tells the
// subscribed sessions each time rows arrive, until ctx ends.
func (s *subscriptions) follow(ctx context.Context, key subKey, caller lakegate.Caller, r query.TailRequest, cursor string) {
	r.Limit, r.Wait, r.Admit = 1, query.MaxTailWait, s.admit
	for ctx.Err() == nil {
		r.Cursor = cursor
		st, err := s.engine.PrepareTail(ctx, caller, r)
		var res *query.Result
		if err == nil {
			var release func()
			if release, err = s.admit(ctx); err == nil {
				res, _, err = query.Collect(ctx, st, 1<<20)
				release()
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("a watch subscription failed to look", "uri", key.uri, "subject", key.subject, "error", err.Error())
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		if res.RowCount > 0 {
			err := key.server.ResourceUpdated(ctx, &mcpsdk.ResourceUpdatedNotificationParams{URI: key.uri})
			if err == nil {
				s.notified.Add(1)
			} else if !errors.Is(err, context.Canceled) {
				s.log.Warn("a watch notification failed", "uri", key.uri, "error", err.Error())
			}
		}
		cursor = res.NextCursor
	}
}

// close ends every subscription and waits for their loops.
func (s *subscriptions) close() {
	s.mu.Lock()
	s.closed = true
	for k, sub := range s.subs {
		sub.cancel()
		delete(s.subs, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// waitSession is closed when session ends.
func waitSession(session *mcpsdk.ServerSession) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		_ = session.Wait()
		close(done)
	}()
	return done
}
