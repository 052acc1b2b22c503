package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
)

// A tool call runs on the replica of its session, and may name a block
// transfer another replica holds (get_result_block, resources/read). The
// session's replica then reads the block from the owner on the caller's
// behalf (Fetch): it signs the caller's subject, with the reader role
// only, into ReplicaHeader with the cluster's secret (the cluster_secret
// setting, the same on every replica; never stored in a database, since
// callers' SQL may read the cluster database), and the owner's host
// accepts the signed caller in place of a bearer token on the block
// routes only (GET of a manifest or a block), as a reader only, and only
// from a request that carries no other credential. The signature covers
// the method, the request URI and an expiry (replicaTTL), so it opens
// that one read only. A signature is never made for any other route: the
// console's gathers pass on the caller's own bearer token.
//
// A signed request can be replayed until it expires, on the same method
// and URI: that is accepted, since a replay opens only the same block
// read for the same caller, which that caller may make anyway.

// ReplicaHeader carries a caller signed by another replica.
const ReplicaHeader = "X-Lakegate-Replica"

// replicaTTL bounds how long a signed request is good for (clocks of the
// replicas may differ by a few seconds).
const replicaTTL = 30 * time.Second

// MinSecretBytes is the shortest cluster secret OpenPeers accepts.
const MinSecretBytes = 32

// legacySecretRow is where versions before cluster_secret kept a random
// signing key, in lakegate_cluster_state: OpenPeers deletes it, so that a
// key once readable there opens nothing and lingers nowhere.
const legacySecretRow = "replica_secret"

type signedCaller struct {
	Subject string   `json:"sub"`
	Roles   []string `json:"roles"`
}

// sign sets ReplicaHeader on r for caller c, with the reader role only
// (a block read needs no other; the receiving host drops any other role
// anyway).
func (p *Peers) sign(r *http.Request, c lakegate.Caller, now time.Time) {
	roles := []string{}
	if c.HasRole(lakegate.RoleReader) {
		roles = append(roles, lakegate.RoleReader)
	}
	body, _ := json.Marshal(signedCaller{Subject: c.Subject, Roles: roles})
	who := base64.RawURLEncoding.EncodeToString(body)
	exp := strconv.FormatInt(now.Add(replicaTTL).Unix(), 10)
	r.Header.Set(ReplicaHeader, exp+"."+who+"."+p.mac(r.Method, r.URL.RequestURI(), exp, who))
}

func (p *Peers) mac(method, uri, exp, who string) string {
	m := hmac.New(sha256.New, p.secret)
	fmt.Fprintf(m, "lakegate-replica\n%s\n%s\n%s\n%s", method, uri, exp, who)
	return hex.EncodeToString(m.Sum(nil))
}

// Caller reads the caller another replica signed into r, as signed: the
// host decides where a signature is accepted and with which roles. ok is
// false when r carries none; an invalid or expired one is an auth error.
func (p *Peers) Caller(r *http.Request) (c lakegate.Caller, ok bool, err error) {
	h := r.Header.Get(ReplicaHeader)
	if h == "" {
		return c, false, nil
	}
	refuse := &lakegate.Error{Kind: lakegate.KindAuth, Message: "the request's replica signature is not valid",
		Hint: "replicas of one cluster must share cluster_dsn and cluster_secret"}
	exp, rest, ok1 := strings.Cut(h, ".")
	who, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !hmac.Equal([]byte(sig), []byte(p.mac(r.Method, r.URL.RequestURI(), exp, who))) {
		return c, true, refuse
	}
	if unix, err := strconv.ParseInt(exp, 10, 64); err != nil || time.Now().Unix() > unix {
		return c, true, refuse
	}
	raw, err := base64.RawURLEncoding.DecodeString(who)
	var sc signedCaller
	if err != nil || json.Unmarshal(raw, &sc) != nil || sc.Subject == "" {
		return c, true, refuse
	}
	return lakegate.Caller{Subject: sc.Subject, Roles: sc.Roles}, true, nil
}

// Send requests path with method (a block route: a transfer's manifest
// or one of its blocks; a job's route) from the replica that owns id, for
// caller c, signed as a reader (the owner accepts the signature on those
// routes only). An id of no known replica is not found.
func (p *Peers) Send(ctx context.Context, c lakegate.Caller, method, id, path string) (*http.Response, error) {
	if len(id) < PrefixLen {
		return nil, lakegate.Errorf(lakegate.KindNotFound, "no such transfer")
	}
	target := p.owner(ctx, id[:PrefixLen])
	if target == nil {
		return nil, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such transfer",
			Hint: "transfers expire after a while and can be read only by the subject that made them"}
	}
	path, query, _ := strings.Cut(path, "?") // a query goes on unescaped
	u := target.JoinPath(path)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(ForwardedHeader, p.prefix)
	p.sign(req, c, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the replica that holds this transfer does not answer",
			Hint: "run the query again", RetryAfter: time.Second, Err: err}
	}
	return resp, nil
}

// Gather GETs path from every other replica with authorization (the
// Authorization header of the caller's own request: every replica shares
// the JWT settings, so each checks the caller itself), and returns the
// bodies of those that answered 200 within gatherTimeout (the others are
// logged and left out). Nothing is signed: a replica's signature opens
// block reads only. The request is marked forwarded, so that each replica
// answers with its own part only.
func (p *Peers) Gather(ctx context.Context, authorization, path string) [][]byte {
	if !p.joined.Load() {
		return nil // on its own: no other replica is known
	}
	ctx, cancel := context.WithTimeout(ctx, gatherTimeout)
	defer cancel()
	var urls []string
	err := p.exec(ctx, func(conn *pgx.Conn) error {
		rows, _ := conn.Query(ctx, `SELECT url FROM lakegate_cluster_replicas WHERE prefix <> $1 AND url IS NOT NULL ORDER BY prefix`, p.prefix)
		var err error
		urls, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		p.log.Warn("cluster: list the replicas", lakegate.LogError, err.Error())
		return nil
	}
	bodies := make([][]byte, len(urls))
	var wg sync.WaitGroup
	for i, base := range urls {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
			if err != nil {
				return
			}
			req.Header.Set(ForwardedHeader, p.prefix)
			req.Header.Set("Authorization", authorization)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				p.log.Warn("cluster: a replica did not answer", "url", base, lakegate.LogError, err.Error())
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxGatherBytes))
			if err == nil && resp.StatusCode == http.StatusOK {
				bodies[i] = body
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(bodies, func(b []byte) bool { return b == nil })
}

// Gather's bounds: how long the other replicas have to answer, and how
// much of an answer is read.
const (
	gatherTimeout  = 2 * time.Second
	maxGatherBytes = 16 << 20
)

// Forwarded reports whether r came from another replica.
func Forwarded(r *http.Request) bool { return r.Header.Get(ForwardedHeader) != "" }

// Forwarded reports whether r came from another replica of p's cluster:
// such a request is answered with this replica's own part only.
func (p *Peers) Forwarded(r *http.Request) bool { return Forwarded(r) }
