package server

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// A browser downloads a file by following a link, and a link cannot carry
// the bearer token, which never goes in a URL either. So the console asks
// for a download ticket with its token (POST /console/api/downloads) and
// follows /console/download/{ticket}: the ticket is a random name bound to
// its caller and to one download, used once, within ticketTTL. The file
// then streams to disk; the page never holds it.

const (
	ticketTTL = time.Minute
	// maxTickets bounds the tickets waiting to be used, maxTicketsPerSubject
	// those of one subject.
	maxTickets           = 1024
	maxTicketsPerSubject = 16
)

// ticket is one download: a SQL result as CSV or a block transfer.
type ticket struct {
	caller   lakegate.Caller
	expires  time.Time
	sql      *query.SQLRequest
	transfer string
	format   string // of the transfer
}

// tickets holds the download tickets not yet used. Safe for concurrent use.
type tickets struct {
	mu sync.Mutex
	m  map[string]*ticket
}

// issue stores t and returns its name, which begins with prefix (a
// cluster's replica prefix: the replica that holds the ticket).
func (ts *tickets) issue(t *ticket, prefix string, now time.Time) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]*ticket{}
	}
	mine := 0
	for name, o := range ts.m {
		if !now.Before(o.expires) {
			delete(ts.m, name)
		} else if o.caller.Subject == t.caller.Subject {
			mine++
		}
	}
	if mine >= maxTicketsPerSubject || len(ts.m) >= maxTickets {
		return "", &lakegate.Error{Kind: lakegate.KindRateLimited, Message: "too many downloads waiting to start",
			Hint: "start the downloads already asked for, or wait a minute", RetryAfter: ticketTTL}
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	name := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	t.expires = now.Add(ticketTTL)
	ts.m[name] = t
	return name, nil
}

// redeem takes the ticket name out, once, if it has not expired.
func (ts *tickets) redeem(name string, now time.Time) (*ticket, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[name]
	if !ok {
		return nil, false
	}
	delete(ts.m, name)
	return t, now.Before(t.expires)
}
