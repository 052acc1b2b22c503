package blocktransport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// DefaultParallel is the number of blocks a Client fetches at once.
const DefaultParallel = 4

// Client fetches the blocks of a transfer from a lakegate server over
// HTTP/1.1, HTTP/2 or HTTP/3, in parallel, checking every block.
type Client struct {
	// BaseURL is where the transfers are served: the server's block
	// routes, e.g. https://db.example.com:32049/mcp/blocks (a transfer's
	// manifest is BaseURL/ID, its blocks BaseURL/ID/N).
	BaseURL string
	// DecodeError reads the body of an error answer: the server's message
	// and the wait it asks for (0: none said). Nil: the status text, and
	// the Retry-After header's wait. When it names no wait, the header's
	// is used.
	DecodeError func(body []byte) (message string, retryAfter time.Duration)
	// Token is the bearer token sent with every request.
	Token string
	// HTTP is the client used (nil: http.DefaultClient). NewHTTP3 makes
	// one that speaks HTTP/3.
	HTTP *http.Client
	// Parallel is the number of blocks in flight (default DefaultParallel).
	// At most twice as many blocks are held in memory.
	Parallel int
	// Progress, when set, is called after each block is written with the
	// bytes written so far and the total.
	Progress func(done, total int64)

	// Attempts bounds the tries of one request (the manifest or a block)
	// that fails with a network error, a 5xx or 408 answer or data that
	// does not match the manifest (default DefaultAttempts). Answers 429
	// are not failures: the client waits as the server asks (Retry-After,
	// or the error's retry_after), pausing all its requests, up to 100
	// times per request. Other 4xx answers and TLS refusals are final.
	Attempts int
	// Backoff is the wait before the first retry of a failure; it doubles
	// with each retry up to 10 s, with jitter (default DefaultBackoff).
	Backoff time.Duration
	// MaxRetryAfter is the longest wait the client accepts from a server;
	// asked to wait longer, it gives up (default DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// Retrying, when set, is called before each wait for a retry. Fetch
	// calls it from several goroutines at once.
	Retrying func(Retry)
	// FollowInterval is how often Fetch asks again for the manifest of a
	// transfer still being written (default DefaultFollowInterval).
	FollowInterval time.Duration
}

// DefaultFollowInterval is Client.FollowInterval's default.
const DefaultFollowInterval = 500 * time.Millisecond

// NewHTTP3 returns an http.Client that speaks HTTP/3 (QUIC) only, with
// tlsConf (nil: the system roots). Close its transport with CloseHTTP3.
func NewHTTP3(tlsConf *tls.Config) *http.Client {
	return &http.Client{Transport: &http3.Transport{TLSClientConfig: tlsConf}}
}

// CloseHTTP3 closes the QUIC connections of a client made by NewHTTP3.
func CloseHTTP3(c *http.Client) {
	if t, ok := c.Transport.(*http3.Transport); ok {
		_ = t.Close()
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) url(parts ...string) string {
	u := strings.TrimSuffix(c.BaseURL, "/")
	for _, p := range parts {
		u += "/" + url.PathEscape(p)
	}
	return u
}

// get sends a GET with the extra header h and returns the response when
// it is 200 (or 206 to a Range request), else an error carrying the
// server's message and the wait it asks for.
func (c *Client) get(ctx context.Context, u string, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK || (resp.StatusCode == http.StatusPartialContent && req.Header.Get("Range") != "") {
		return resp, nil
	}
	defer resp.Body.Close()
	var msg string
	wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	if c.DecodeError != nil {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var w time.Duration
		// A body's wait may be exact where the header rounds up to seconds.
		if msg, w = c.DecodeError(data); w > 0 && w < 1e6*time.Second {
			wait = w
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, &StatusError{Code: resp.StatusCode, Message: msg, RetryAfter: wait}
}

// Manifest fetches the manifest of transfer id, retrying as Attempts says.
func (c *Client) Manifest(ctx context.Context, id string) (*Manifest, error) {
	return c.manifest(ctx, &pacer{}, id, "")
}

// followQuery asks the server to answer a manifest once it has more than
// after blocks (or is complete), waiting up to MaxAwait: the follow of a
// transfer being written learns of each block as it is sealed. A server
// that does not know it answers at once.
func followQuery(after int) string {
	return fmt.Sprintf("?after=%d&wait_ms=%d", after, MaxAwait.Milliseconds())
}

func (c *Client) manifest(ctx context.Context, p *pacer, id, query string) (*Manifest, error) {
	if err := c.checkBaseURL(); err != nil {
		return nil, err
	}
	var m *Manifest
	err := c.retry(ctx, p, -1, func(ctx context.Context) error {
		var err error
		m, err = c.manifestOnce(ctx, id, query)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("manifest of %s: %w", id, err)
	}
	return m, nil
}

func (c *Client) manifestOnce(ctx context.Context, id, query string) (*Manifest, error) {
	resp, err := c.get(ctx, c.url(id)+query, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m Manifest
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	for i, b := range m.Blocks {
		if b.N != i || b.Size < 0 {
			return nil, finalError{fmt.Errorf("block %d of the manifest is malformed", i)}
		}
	}
	return &m, nil
}

// checkBaseURL refuses a BaseURL no retry could reach.
func (c *Client) checkBaseURL() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("blocks URL %q: want one such as https://host:32049/mcp/blocks", c.BaseURL)
	}
	return nil
}

// Block fetches block b of transfer id and checks its size and SHA-256,
// retrying as Attempts says. A retry after a cut-off read asks only for
// the rest of the block (Range, If-Range on its ETag).
func (c *Client) Block(ctx context.Context, id string, b Block) ([]byte, error) {
	return c.block(ctx, &pacer{}, id, b, nil)
}

// block reads block b into buf when it has room (else into a new slice).
func (c *Client) block(ctx context.Context, p *pacer, id string, b Block, buf []byte) ([]byte, error) {
	data := buf[:0]
	if int64(cap(data)) < b.Size {
		// Blocks are about one size, each a little under or over the
		// last: room to the next power of two lets the buffer serve the
		// blocks after it.
		data = make([]byte, b.Size, 1<<bits.Len64(uint64(b.Size)))
	}
	data = data[:b.Size]
	var have int64 // bytes of data received and not yet found damaged
	err := c.retry(ctx, p, b.N, func(ctx context.Context) error {
		var err error
		have, err = c.blockOnce(ctx, id, b, data, have)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("block %d of %s: %w", b.N, id, err)
	}
	return data, nil
}

// blockOnce reads block b into data, asking only for what follows the
// first have bytes already there. It returns how many bytes data holds
// (0 when they are found damaged).
func (c *Client) blockOnce(ctx context.Context, id string, b Block, data []byte, have int64) (int64, error) {
	var h http.Header
	if have > 0 && have < b.Size {
		h = http.Header{"Range": {"bytes=" + strconv.FormatInt(have, 10) + "-"}, "If-Range": {`"` + b.CRC32C + `"`}}
	}
	resp, err := c.get(ctx, c.url(id, strconv.Itoa(b.N)), h)
	if err != nil {
		return have, err
	}
	defer resp.Body.Close()
	from := int64(0)
	if resp.StatusCode == http.StatusPartialContent {
		if from = rangeStart(resp.Header.Get("Content-Range")); from != have {
			return 0, fmt.Errorf("asked for bytes from %d, got a range from %d", have, from)
		}
	}
	n, err := io.ReadFull(resp.Body, data[from:])
	if err != nil {
		return from + int64(n), fmt.Errorf("read: %w", err)
	}
	if n, _ := resp.Body.Read(make([]byte, 1)); n > 0 {
		return 0, fmt.Errorf("the block is longer than the manifest's %d bytes", b.Size)
	}
	if err := Verify(data, b); err != nil {
		return 0, err
	}
	return b.Size, nil
}

// rangeStart is the first byte of a Content-Range "bytes a-b/n", or -1.
func rangeStart(v string) int64 {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return -1
	}
	a, _, ok := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil {
		return -1
	}
	return n
}

// Fetch writes the whole result of transfer id to w, in order, fetching
// Parallel blocks at a time and checking every block against the
// manifest's SHA-256 (so the whole is checked too: the complete manifest
// must list the blocks written, in order, with the same sums). A
// transfer still being written is followed: its sealed blocks are fetched
// at once, and its manifest asked again (every FollowInterval) until it
// is complete. Each request is retried as Attempts says; a block that
// fails is fetched again alone (never a block already checked), and a 429
// pauses every request of the fetch for the wait the server names. When a
// request fails for good, Fetch stops the others and returns its error; w
// may then hold a prefix of the result.
func (c *Client) Fetch(ctx context.Context, id string, w io.Writer) (*Manifest, error) {
	p := &pacer{}
	m, err := c.manifest(ctx, p, id, "")
	if err != nil {
		return nil, err
	}
	parallel := c.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	type result struct {
		data []byte
		err  error
	}
	type fetch struct {
		b   Block
		out chan result
	}
	// order holds the blocks dispatched but not yet written, in order:
	// it bounds the blocks held in memory to about twice Parallel.
	order := make(chan fetch, 2*parallel)
	jobs := make(chan fetch)
	// The feeder dispatches the manifest's blocks and, while the transfer
	// is being written, asks for the manifest again; final is the
	// complete manifest (or feedErr why there is none), read once order
	// is closed.
	var final *Manifest
	var feedErr error
	var known atomic.Int64 // bytes of the blocks known so far
	known.Store(m.Bytes)
	wg.Go(func() {
		defer close(order)
		defer close(jobs)
		next := 0
		for {
			for ; next < len(m.Blocks); next++ {
				f := fetch{b: m.Blocks[next], out: make(chan result, 1)}
				select {
				case order <- f:
				case <-ctx.Done():
					return
				}
				select {
				case jobs <- f:
				case <-ctx.Done():
					return
				}
			}
			if m.Complete {
				final = m
				return
			}
			asked := time.Now()
			if m, feedErr = c.manifest(ctx, p, id, followQuery(next)); feedErr != nil {
				return
			}
			known.Store(m.Bytes)
			if len(m.Blocks) <= next && !m.Complete && time.Since(asked) < c.followInterval() {
				// Nothing new, at once: a server that does not wait.
				if err := sleep(ctx, c.followInterval()); err != nil {
					return
				}
			}
		}
	})
	// The buffers of blocks written are fetched into again: at most
	// 3*parallel are in use (dispatched, fetching, being written).
	free := make(chan []byte, 3*parallel)
	for range parallel {
		wg.Go(func() {
			for f := range jobs {
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				data, err := c.block(ctx, p, id, f.b, buf)
				f.out <- result{data, err}
			}
		})
	}

	var written []Block
	var done int64
	for f := range order {
		var r result
		select {
		case r = <-f.out:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err != nil {
			return nil, r.err
		}
		if _, err := w.Write(r.data); err != nil {
			return nil, fmt.Errorf("write result: %w", err)
		}
		select {
		case free <- r.data:
		default:
		}
		written = append(written, f.b)
		done += int64(len(r.data))
		if c.Progress != nil {
			c.Progress(done, known.Load())
		}
	}
	wg.Wait() // the feeder has ended: final and feedErr are set
	switch {
	case feedErr != nil:
		return nil, feedErr
	case final == nil:
		return nil, ctx.Err()
	}
	if !slices.Equal(written, final.Blocks) || done != final.Bytes {
		return nil, fmt.Errorf("transfer %s: the blocks written (%d, %d bytes) are not the complete manifest's (%d, %d bytes)",
			id, len(written), done, len(final.Blocks), final.Bytes)
	}
	return final, nil
}

// followInterval is how often Fetch asks again for the manifest of a
// transfer being written.
func (c *Client) followInterval() time.Duration {
	if c.FollowInterval > 0 {
		return c.FollowInterval
	}
	return DefaultFollowInterval
}
