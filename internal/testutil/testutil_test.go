package testutil

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Within(time.Second, func() bool { return time.Since(start) >= 300*time.Millisecond }) {
			t.Error("got false for a condition that holds after 300ms, want true")
		}
		if waited := time.Since(start); waited > 300*time.Millisecond+maxPause {
			t.Errorf("returned after %s, want at most one pause after the condition held", waited)
		}
		start = time.Now()
		if Within(time.Second, func() bool { return false }) {
			t.Error("got true for a condition that never holds")
		}
		if waited := time.Since(start); waited < time.Second || waited > time.Second+maxPause {
			t.Errorf("gave up after %s, want 1s", waited)
		}
	})
}

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 400 {
		t.Errorf("got %d bytes, want 400", n)
	}
}

func TestBearerAndToken(t *testing.T) {
	const secret = "testutil-secret-0123456789abcdef0123"
	auth := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	tok := Token(secret, "alice", "reader")
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := (&http.Client{Transport: Bearer{Token: tok}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-auth; got != "Bearer "+tok {
		t.Errorf("got Authorization %q, want the bearer token", got)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was changed")
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithIssuedAt()); err != nil {
		t.Fatal(err)
	}
	if claims["sub"] != "alice" || claims["role"] != "reader" {
		t.Errorf("got claims %v, want sub alice and role reader", claims)
	}
}

func TestReplaceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	ReplaceFile(t, path, []byte("one"))
	ReplaceFile(t, path, []byte("two"))
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "two" {
		t.Errorf("got %q %v, want the second version", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("got %d files, want only the replaced one", len(entries))
	}
}
