package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
)

const testSecret = "0123456789abcdef0123456789abcdef"

func TestReplicaSignature(t *testing.T) {
	p := &Peers{prefix: "0a0b0c0d", secret: []byte(testSecret)}
	other := &Peers{prefix: "01020304", secret: []byte("another cluster's secret........")}
	alice := lakegate.Caller{Subject: "alice", Roles: []string{"reader"}}
	signed := func(signer *Peers, method, target string, at time.Time) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		signer.sign(r, alice, at)
		return r
	}
	now := time.Now()

	r := signed(p, "GET", "/mcp/blocks/0a0b0c0dffff/0", now)
	c, ok, err := p.Caller(r)
	if !ok || err != nil || c.Subject != "alice" || !slices.Equal(c.Roles, []string{"reader"}) {
		t.Fatalf("a good signature: got %+v %v %v, want alice as a reader", c, ok, err)
	}
	if _, ok, err := p.Caller(httptest.NewRequest("GET", "/x", nil)); ok || err != nil {
		t.Errorf("no signature: got ok %v, err %v, want neither", ok, err)
	}
	// A signature opens the one request it was made for.
	moved := signed(p, "GET", "/mcp/blocks/a/0", now)
	moved.URL.Path, moved.RequestURI = "/mcp/blocks/a/1", "/mcp/blocks/a/1"
	queried := signed(p, "GET", "/mcp/blocks/a/0", now)
	queried.URL.RawQuery = "x=1"
	posted := signed(p, "GET", "/mcp/blocks/a/0", now)
	posted.Method = "POST"
	altered := signed(p, "GET", "/mcp/blocks/a/0", now)
	altered.Header.Set(ReplicaHeader, altered.Header.Get(ReplicaHeader)[:20]+"x"+altered.Header.Get(ReplicaHeader)[21:])
	tests := []struct {
		name string
		r    *http.Request
	}{
		{"another cluster's secret", signed(other, "GET", "/mcp/blocks/a/0", now)},
		{"expired", signed(p, "GET", "/mcp/blocks/a/0", now.Add(-2*replicaTTL))},
		{"another path", moved},
		{"another query", queried},
		{"another method", posted},
		{"altered", altered},
		{"garbage", withHeader(httptest.NewRequest("GET", "/mcp/blocks/a/0", nil), "nonsense")},
		{"empty parts", withHeader(httptest.NewRequest("GET", "/mcp/blocks/a/0", nil), "..")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok, err := p.Caller(tt.r); !ok || lakegate.KindOf(err) != lakegate.KindAuth {
				t.Errorf("got ok %v, err %v, want an auth error", ok, err)
			}
		})
	}
}

func withHeader(r *http.Request, v string) *http.Request {
	r.Header.Set(ReplicaHeader, v)
	return r
}

// TestSignReaderOnly: a replica signs the reader role only, whatever the
// caller holds: a block read needs no other.
func TestSignReaderOnly(t *testing.T) {
	p := &Peers{prefix: "0a0b0c0d", secret: []byte(testSecret)}
	tests := []struct {
		name  string
		roles []string
		want  []string
	}{
		{"reader", []string{"reader"}, []string{"reader"}},
		{"admin", []string{"admin"}, []string{"reader"}},
		{"reader and writer", []string{"writer", "reader"}, []string{"reader"}},
		{"writer only", []string{"writer"}, []string{}},
		{"none", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/mcp/blocks/a/0", nil)
			p.sign(r, lakegate.Caller{Subject: "alice", Roles: tt.roles}, time.Now())
			c, ok, err := p.Caller(r)
			if !ok || err != nil {
				t.Fatalf("got ok %v, err %v, want a good signature", ok, err)
			}
			if !slices.Equal(c.Roles, tt.want) {
				t.Errorf("got roles %v, want %v", c.Roles, tt.want)
			}
			// And the header shows nothing of the secret.
			if h := r.Header.Get(ReplicaHeader); strings.Contains(h, testSecret) {
				t.Errorf("got header %q, want no secret in it", h)
			}
			_, rest, _ := strings.Cut(r.Header.Get(ReplicaHeader), ".")
			who, _, _ := strings.Cut(rest, ".")
			raw, _ := base64.RawURLEncoding.DecodeString(who)
			var sc signedCaller
			if err := json.Unmarshal(raw, &sc); err != nil || !slices.Equal(sc.Roles, tt.want) {
				t.Errorf("got signed %s (%v), want roles %v", raw, err, tt.want)
			}
		})
	}
}

func TestOpenPeersSecret(t *testing.T) {
	for _, secret := range []string{"", "short"} {
		_, err := OpenPeers(t.Context(), "postgres://nobody@127.0.0.1:1/none", []byte(secret), nil)
		if err == nil || !strings.Contains(err.Error(), "cluster_secret") {
			t.Errorf("secret of %d bytes: got %v, want an error naming cluster_secret", len(secret), err)
		}
	}
}

// TestOpenPeersDeletesStoredSecret: a signing key an older version kept
// in the cluster database is deleted at start, and none is written.
func TestOpenPeersDeletesStoredSecret(t *testing.T) {
	dsn, _ := testDSN(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := ensureSchema(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO lakegate_cluster_state (name, value, changed_by) VALUES ('replica_secret', 'deadbeef', 'start')`); err != nil {
		t.Fatal(err)
	}
	p, err := OpenPeers(t.Context(), dsn, []byte(testSecret), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM lakegate_cluster_state WHERE name = 'replica_secret'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("got %d replica_secret rows (%v), want 0", n, err)
	}
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM lakegate_cluster_state WHERE strpos(value, $1) > 0`, testSecret).Scan(&n); err != nil || n != 0 {
		t.Errorf("got %d rows holding the cluster secret (%v), want 0", n, err)
	}
}
