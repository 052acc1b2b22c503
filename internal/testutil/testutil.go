// Package testutil holds what lakegate's tests share: waiting for a
// condition (Eventually, Within), a buffer one goroutine writes while
// another reads (Buffer), an HTTP transport that sends a bearer token
// (Bearer), HS256 tokens like the token command's (Token), a TCP proxy
// that takes a database away and brings it back (Proxy), and whether a
// deep call copies a goroutine's stack (DeepCallCopiesStack).
//
// It is test support: only tests and the test programs under integration
// import it. It must not import any lakegate package, so that the tests
// of every package, server's and mcp's included, can use it.
package testutil

import (
	"bytes"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxPause is the longest pause between two calls of a condition.
const maxPause = 20 * time.Millisecond

// Within calls cond until it returns true or d has passed, pausing a
// little longer each time (1 ms at first, at most 20 ms), and reports
// whether it returned true. In a synctest bubble the pauses take no real
// time.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for pause := time.Millisecond; ; pause = min(2*pause, maxPause) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

// Eventually waits, as Within does, for cond to return true, and stops
// the test (t.Fatalf) when it has not within d, saying what it waited for.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: a process's or a
// logger's writes and a test's reads. The zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Bearer is an http.RoundTripper that sends every request with the
// header "Authorization: Bearer " and Token, through Base (nil:
// http.DefaultTransport). The caller's request is not changed.
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip sends a copy of r carrying the token.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	base := b.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// Token signs an HS256 token for subject holding role, valid for an hour,
// with the claims the token command writes (sub, role, iat, exp).
func Token(secret, subject, role string) string {
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": subject, "role": role, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		panic(err) // HS256 with a []byte key does not fail
	}
	return tok
}

// ReplaceFile writes data to path as an editor or a config manager does:
// to a file beside it, renamed over it, so that a reader of path never
// sees half of it.
func ReplaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
