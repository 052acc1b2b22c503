package server

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

func TestSQLStreaming(t *testing.T) {
	st := newStack(t, nil)
	tok := token("alice", lakegate.RoleReader)
	total := st.count(t, "readings")
	stream := func(t *testing.T, format, sql string, limit int) (*http.Response, []byte) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"database": "demo", "sql": sql, "format": format, "limit": limit})
		req, _ := http.NewRequestWithContext(t.Context(), "POST", st.http.URL+"/rest/sql", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := st.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body) // trailers arrive after the body
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	t.Run("csv", func(t *testing.T) {
		resp, b := stream(t, "csv", "SELECT id, status, note FROM readings ORDER BY id", 0)
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %d, %v", resp.StatusCode, err)
		}
		if int64(len(recs)-1) != total || strings.Join(recs[0], ",") != "id,status,note" {
			t.Errorf("got %d records with header %v, want %d rows and the header", len(recs)-1, recs[0], total)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Errorf("content type: got %q, want text/csv", ct)
		}
		if got, want := resp.Trailer.Get("X-Row-Count"), len(recs)-1; got != strconv.Itoa(want) {
			t.Errorf("X-Row-Count trailer: got %q, want %d", got, want)
		}
		if got := resp.Trailer.Get("X-Truncated"); got != "false" {
			t.Errorf("X-Truncated trailer: got %q, want false", got)
		}
	})
	t.Run("ndjson with a limit", func(t *testing.T) {
		resp, b := stream(t, "ndjson", "SELECT id, temperature FROM readings ORDER BY id", 7)
		sc := bufio.NewScanner(bytes.NewReader(b))
		n := 0
		for sc.Scan() {
			var row []any
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("line %d %q: %v", n, sc.Text(), err)
			}
			n++
		}
		if n != 7 || resp.Trailer.Get("X-Truncated") != "true" || resp.Trailer.Get("X-Row-Count") != "7" {
			t.Errorf("got %d lines, trailers %v; want 7 rows, truncated", n, resp.Trailer)
		}
	})
	t.Run("json", func(t *testing.T) {
		_, b := stream(t, "json", "SELECT id FROM devices ORDER BY id", 0)
		var rows [][]any
		if err := json.Unmarshal(b, &rows); err != nil || int64(len(rows)) != st.count(t, "devices") {
			t.Errorf("got %d rows (%v) from %q", len(rows), err, b[:min(len(b), 80)])
		}
	})
	t.Run("the JSON result object streams, with its summary last and in trailers", func(t *testing.T) {
		body := `{"database":"demo","sql":"SELECT id, note FROM readings ORDER BY id","limit":300}`
		req, _ := http.NewRequestWithContext(t.Context(), "POST", st.http.URL+"/rest/sql", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := st.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("got content length %d, transfer encoding %v; want a chunked stream", resp.ContentLength, resp.TransferEncoding)
		}
		var res struct {
			Columns   []query.ResultColumn `json:"columns"`
			Rows      [][]any              `json:"rows"`
			RowCount  int                  `json:"row_count"`
			Truncated bool                 `json:"truncated"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%v: %.200s", err, b)
		}
		if len(res.Rows) != 300 || res.RowCount != 300 || !res.Truncated || len(res.Columns) != 2 ||
			!bytes.HasPrefix(b, []byte(`{"columns":`)) || bytes.Index(b, []byte(`"row_count"`)) < bytes.LastIndex(b, []byte(`]]`)) {
			t.Errorf("got %d rows, row_count %d, truncated %v; want 300, truncated, columns first and the summary after the rows",
				len(res.Rows), res.RowCount, res.Truncated)
		}
		if resp.Trailer.Get("X-Row-Count") != "300" || resp.Trailer.Get("X-Truncated") != "true" {
			t.Errorf("trailers %v, want X-Row-Count 300 and X-Truncated true", resp.Trailer)
		}
	})
	t.Run("errors before the first row are JSON", func(t *testing.T) {
		for _, tc := range []struct{ name, format, sql string }{
			{"refused sql", "csv", "DELETE FROM readings"},
			{"bad format", "xml", "SELECT 1"},
			{"unknown column", "ndjson", "SELECT nope FROM readings"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, b := stream(t, tc.format, tc.sql, 0)
				r := response{code: resp.StatusCode, header: resp.Header, body: b}
				if r.code != 400 || r.errBody(t).Error.Kind != lakegate.KindValidation {
					t.Errorf("got %d %s, want 400 validation_error", r.code, b)
				}
			})
		}
	})
}
