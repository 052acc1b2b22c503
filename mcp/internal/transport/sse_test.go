package transport

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// subHeader names the caller of a request to sseServer.
type subHeader struct {
	sub  string
	base http.RoundTripper
}

func (s subHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Sub", s.sub)
	return s.base.RoundTrip(r)
}

// TestSSEPostsKeepTheConnection: a client that closes a POST's answer
// unread (go-sdk's does) still sends the next POST on the same
// connection, so a session costs two connections however many messages
// it sends: a 202 with a body would cost a connection, and its accept and
// goroutine on the server, per message.
func TestSSEPostsKeepTheConnection(t *testing.T) {
	_, _, base := sseServer(t, SSEOptions{})
	var dials atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: subHeader{sub: "alice", base: tr}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
		&mcpsdk.SSEClientTransport{Endpoint: base + "/mcp/sse", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const pings = 20
	for range pings {
		if err := cs.Ping(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The stream's GET, and one connection for initialize, initialized
	// and the pings. Go's client may dial one more now and then: it
	// reuses a connection once it has seen its request written, and waits
	// at most 50 ms for that (a loaded machine can take longer). A body
	// in the 202 cost a connection per POST, 24 here.
	if n := dials.Load(); n > 4 {
		t.Errorf("a session of %d POSTs dialled %d connections; want 2", pings+2, n)
	}
}
