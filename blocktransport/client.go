package blocktransport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// DefaultParallel is the number of blocks a Client fetches at once.
const DefaultParallel = 4

// Client fetches the blocks of a transfer from a lakegate server over
// HTTP/1.1, HTTP/2 or HTTP/3, in parallel, checking every block.
type Client struct {
	// BaseURL is the server, e.g. https://db.example.com:32049.
	BaseURL string
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
}

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

// blockAttempts is how many times a block is tried before giving up.
const blockAttempts = 3

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) url(parts ...string) string {
	u := strings.TrimSuffix(c.BaseURL, "/") + "/mcp/blocks"
	for _, p := range parts {
		u += "/" + url.PathEscape(p)
	}
	return u
}

// get sends a GET and returns the response when it is 200, else an error
// carrying the server's message.
func (c *Client) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Message string `json:"message"`
			Hint    string `json:"hint"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	msg := body.Error.Message
	if body.Error.Hint != "" {
		msg += " (" + body.Error.Hint + ")"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, &StatusError{Code: resp.StatusCode, Message: msg}
}

// StatusError is a non-200 answer from the server.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }

// Manifest fetches the manifest of transfer id.
func (c *Client) Manifest(ctx context.Context, id string) (*Manifest, error) {
	resp, err := c.get(ctx, c.url(id))
	if err != nil {
		return nil, fmt.Errorf("manifest of %s: %w", id, err)
	}
	defer resp.Body.Close()
	var m Manifest
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest of %s: %w", id, err)
	}
	for i, b := range m.Blocks {
		if b.N != i || b.Size < 0 {
			return nil, fmt.Errorf("manifest of %s: block %d is malformed", id, i)
		}
	}
	return &m, nil
}

// Block fetches block b of transfer id and checks its size and SHA-256.
// Network failures and 5xx answers are tried again, up to three times.
func (c *Client) Block(ctx context.Context, id string, b Block) ([]byte, error) {
	var err error
	for attempt := range blockAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		var data []byte
		data, err = c.blockOnce(ctx, id, b)
		if err == nil {
			return data, nil
		}
		var se *StatusError
		if ctx.Err() != nil || (errors.As(err, &se) && se.Code < 500) {
			break
		}
	}
	return nil, fmt.Errorf("block %d of %s: %w", b.N, id, err)
}

func (c *Client) blockOnce(ctx context.Context, id string, b Block) ([]byte, error) {
	resp, err := c.get(ctx, c.url(id, strconv.Itoa(b.N)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data := make([]byte, b.Size)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if n, _ := resp.Body.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("the block is longer than the manifest's %d bytes", b.Size)
	}
	if err := Verify(data, b.SHA256); err != nil {
		return nil, err
	}
	return data, nil
}

// Fetch writes the whole result of transfer id to w, in order, fetching
// Parallel blocks at a time and checking every block and the whole. On
// any failure it stops the other fetches and returns the error; w may
// then hold a prefix of the result.
func (c *Client) Fetch(ctx context.Context, id string, w io.Writer) (*Manifest, error) {
	m, err := c.Manifest(ctx, id)
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
	results := make([]chan result, len(m.Blocks))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	// held bounds the blocks fetched but not yet written. Slots are taken
	// in block order, so the block the writer waits for always has one.
	held := make(chan struct{}, 2*parallel)
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for n := range m.Blocks {
			select {
			case held <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- n:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range parallel {
		wg.Go(func() {
			for n := range jobs {
				data, err := c.Block(ctx, id, m.Blocks[n])
				results[n] <- result{data, err}
			}
		})
	}

	total := sha256.New()
	var done int64
	for n := range m.Blocks {
		var r result
		select {
		case r = <-results[n]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err != nil {
			return nil, r.err
		}
		if _, err := w.Write(r.data); err != nil {
			return nil, fmt.Errorf("write result: %w", err)
		}
		total.Write(r.data)
		done += int64(len(r.data))
		<-held
		if c.Progress != nil {
			c.Progress(done, m.Bytes)
		}
	}
	if got := hex.EncodeToString(total.Sum(nil)); got != m.SHA256 {
		return nil, fmt.Errorf("transfer %s: %w", id, &ChecksumError{Want: m.SHA256, Got: got})
	}
	return m, nil
}
