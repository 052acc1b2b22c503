package ssetest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []Event
	}{
		{"endpoint", "event: endpoint\ndata: /mcp/messages/?session_id=1\n\n",
			[]Event{{Name: "endpoint", Data: "/mcp/messages/?session_id=1", Raw: "event: endpoint\ndata: /mcp/messages/?session_id=1"}}},
		{"keepalive comment", ": keepalive\n\n", []Event{{Comment: "keepalive", Raw: ": keepalive"}}},
		{"data lines join with newlines", "event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n",
			[]Event{{Name: "message", Data: "{\n\"a\":1\n}", Raw: "event: message\ndata: {\ndata: \"a\":1\ndata: }"}}},
		{"an empty data line", "data: a\ndata: \ndata: b\n\n", []Event{{Data: "a\n\nb", Raw: "data: a\ndata: \ndata: b"}}},
		{"id, no space after the colon, one space dropped", "id:7\ndata:  x\n\n", []Event{{ID: "7", Data: " x", Raw: "id:7\ndata:  x"}}},
		{"a field without a colon", "data\n\n", []Event{{Raw: "data"}}},
		{"CRLF", "event: a\r\ndata: b\r\n\r\n: c\r\n\r\n",
			[]Event{{Name: "a", Data: "b", Raw: "event: a\r\ndata: b"}, {Comment: "c", Raw: ": c"}}},
		{"blank blocks are skipped", "\n\n\n\ndata: a\n\n\n\n", []Event{{Data: "a", Raw: "data: a"}}},
		{"unknown fields are ignored", "retry: 10\nfoo: bar\ndata: a\n\n", []Event{{Data: "a", Raw: "retry: 10\nfoo: bar\ndata: a"}}},
		{"two events", "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n",
			[]Event{{Name: "a", Data: "1", Raw: "event: a\ndata: 1"}, {Name: "b", Data: "2", Raw: "event: b\ndata: 2"}}},
		{"empty stream", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadAll(strings.NewReader(tc.stream))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReaderTooLarge(t *testing.T) {
	_, err := ReadAll(strings.NewReader("data: " + strings.Repeat("x", MaxEventSize) + "\n\n"))
	if err == nil {
		t.Error("got no error for an event over MaxEventSize")
	}
}

// Events written one by one reach Next; silence is ErrTimeout; the end of
// the stream is io.EOF.
func TestStream(t *testing.T) {
	next := make(chan string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		for s := range next {
			_, _ = io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)

	s, err := Open(t.Context(), nil, srv.URL, Bearer("tok"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(50 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("nothing sent: got %v, want ErrTimeout", err)
	}
	next <- "event: endpoint\ndata: /x\n\n"
	if ev, err := s.Next(5 * time.Second); err != nil || ev.Name != "endpoint" || ev.Data != "/x" {
		t.Errorf("got %+v, %v; want the endpoint event", ev, err)
	}
	next <- ": keepalive\n\n"
	if ev, err := s.Next(5 * time.Second); err != nil || ev.Comment != "keepalive" {
		t.Errorf("got %+v, %v; want the keepalive comment", ev, err)
	}
	close(next)
	if _, err := s.Next(5 * time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("stream ended: got %v, want io.EOF", err)
	}
	s.Close()
	s.Close()
}

// Close ends a stream still sending, whose reader waits to hand over an
// event nobody takes.
func TestStreamClose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; r.Context().Err() == nil; i++ {
			_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	s, err := Open(t.Context(), srv.Client(), srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Next(5 * time.Second); err != nil || ev.Data != "0" {
		t.Errorf("got %+v, %v; want data 0", ev, err)
	}
	s.Close()
	if _, err := s.Next(time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("after Close: got %v, want io.EOF", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{}")
			return
		}
		http.Error(w, `{"kind":"unauthorized"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ name, path, want string }{
		{"status", "/", `401 "text/plain; charset=utf-8" {"kind":"unauthorized"}`},
		{"content type", "/json", `200 "application/json" {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), nil, srv.URL+tc.path, nil)
			if err == nil {
				s.Close()
				t.Fatal("got a stream, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want it to contain %s", err, tc.want)
			}
		})
	}
}

// Any event written as the specification says reads back the same.
func FuzzReader(f *testing.F) {
	f.Add("message", "{\"a\":1}", "1")
	f.Add("", "a\n\nb", "")
	f.Add("endpoint", ": not a comment", "x:y")
	f.Add("", "", "")
	f.Add("e", "\n", "")
	f.Fuzz(func(t *testing.T, name, data, id string) {
		if strings.ContainsAny(name+data+id, "\r") || strings.ContainsAny(name+id, "\n") {
			t.Skip("field values cannot hold line ends; data lines split on \\n")
		}
		var b strings.Builder
		if name != "" {
			fmt.Fprintf(&b, "event: %s\n", name)
		}
		if id != "" {
			fmt.Fprintf(&b, "id: %s\n", id)
		}
		for line := range strings.SplitSeq(data, "\n") {
			fmt.Fprintf(&b, "data: %s\n", line)
		}
		raw := strings.TrimSuffix(b.String(), "\n")
		got, err := ReadAll(strings.NewReader(b.String() + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := []Event{{Name: name, Data: data, ID: id, Raw: raw}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %+v, want %+v", b.String(), got, want)
		}
	})
}
