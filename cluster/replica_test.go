package cluster

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lakegate/lakegate"
)

func TestReplicaSignature(t *testing.T) {
	p := &Peers{prefix: "0a0b0c0d", secret: []byte("0123456789abcdef0123456789abcdef")}
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
	if !ok || err != nil || c.Subject != "alice" || len(c.Roles) != 1 || c.Roles[0] != "reader" {
		t.Fatalf("a good signature: %+v %v %v", c, ok, err)
	}
	if _, ok, err := p.Caller(httptest.NewRequest("GET", "/x", nil)); ok || err != nil {
		t.Errorf("no signature: ok %v, err %v; want neither", ok, err)
	}
	for name, r := range map[string]*http.Request{
		"another cluster's secret": signed(other, "GET", "/mcp/blocks/a/0", now),
		"expired":                  signed(p, "GET", "/mcp/blocks/a/0", now.Add(-2*replicaTTL)),
	} {
		if _, ok, err := p.Caller(r); !ok || lakegate.KindOf(err) != lakegate.KindAuth {
			t.Errorf("%s: ok %v, err %v; want an auth error", name, ok, err)
		}
	}
	// A signature opens the one request it was made for.
	moved := signed(p, "GET", "/mcp/blocks/a/0", now)
	moved.URL.Path, moved.RequestURI = "/mcp/blocks/a/1", "/mcp/blocks/a/1"
	posted := signed(p, "GET", "/mcp/blocks/a/0", now)
	posted.Method = "POST"
	forged := signed(p, "GET", "/mcp/blocks/a/0", now)
	forged.Header.Set(ReplicaHeader, forged.Header.Get(ReplicaHeader)[:20]+"x"+forged.Header.Get(ReplicaHeader)[21:])
	for name, r := range map[string]*http.Request{"another path": moved, "another method": posted, "altered": forged} {
		if _, ok, err := p.Caller(r); !ok || lakegate.KindOf(err) != lakegate.KindAuth {
			t.Errorf("%s: ok %v, err %v; want an auth error", name, ok, err)
		}
	}
}
