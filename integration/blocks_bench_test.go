package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/mcp"
)

// TestBlockTransportWall (make bench, LAKEGATE_BENCH_BLOCKS=1): the seed's
// criterion for the block transport, (the export call and the fetch of
// every block) ÷ (the same rows streamed inline: /rest/sql, ndjson), each
// to a file, at 1M and 4M rows. The blocks are fetched two ways:
// `lakegate fetch --sql` (blocks in parallel, each checked) and one GET of
// /all that follows the transfer as the export writes it (its SHA-256
// checked against the trailer). Each runs on a server with the profile of
// results in blocks (the default) and on one without it
// (mcp_result_profile false), taking turns over 5 rounds, each run right
// after an inline stream of its own: the median of those pairs' ratios
// (the machine's load drifts less within a pair than across a round),
// and the best walls with the server's CPU time for each. LAKEGATE_BENCH_BIN adds an
// earlier build to the same rounds (its /all may wait for the export's
// end).
//
//	LAKEGATE_BENCH_BLOCKS=1 LAKEGATE_BENCH_DATABASE_URL=... go test -run '^TestBlockTransportWall$' -count=1 -v -timeout 20m ./integration/
func TestBlockTransportWall(t *testing.T) {
	benchURL := benchDatabase(t, "LAKEGATE_BENCH_BLOCKS")
	type server struct {
		name string
		bin  string // its lakegate fetch too
		p    *proc
	}
	var servers []server
	var names []string
	builds := [][2]string{{"", buildBinary(t)}}
	if earlier := os.Getenv("LAKEGATE_BENCH_BIN"); earlier != "" {
		builds = append(builds, [2]string{", earlier build", earlier})
	}
	for _, b := range builds {
		servers = append(servers, server{"profiled" + b[0], b[1], startProc(t, b[1], benchEnv(benchURL)...)},
			server{"no profile" + b[0], b[1], startProc(t, b[1], benchEnv(benchURL, "LAKEGATE_MCP_RESULT_PROFILE=false")...)})
		names = append(names, "fetch, profiled"+b[0], "/all, profiled"+b[0], "fetch, no profile"+b[0], "/all, no profile"+b[0])
	}
	const rounds = 5
	dir := t.TempDir()
	tok := token("bench", "reader")
	for _, q := range []struct {
		rows int
		sql  string
	}{
		{1_000_000, "SELECT * FROM readings"},
		{4_000_000, "SELECT r.* FROM readings r, generate_series(1, 4) g"},
	} {
		type result struct{ wall, cpu time.Duration }
		best := map[string]result{}
		ratios := map[string][]float64{} // each run ÷ the inline run just before it
		var size int64
		keep := func(name string, r result, n int64) {
			if size == 0 {
				size = n
			}
			if n != size {
				t.Fatalf("%s: %d bytes, the inline stream had %d", name, n, size)
			}
			if b, ok := best[name]; !ok || r.wall < b.wall {
				best[name] = r
			}
		}
		inline := func() time.Duration {
			wall, cpu, n, _ := timed(t, servers[0].p, func() (int64, string) { return inlineRun(t, servers[0].p, tok, q.sql, dir), "" })
			keep("inline", result{wall, cpu}, n)
			return wall
		}
		// pair times run right after an inline stream and keeps the two
		// walls' ratio. Each run's transfer is deleted once timed: the
		// spools would otherwise hold gigabytes until their TTL.
		pair := func(name string, p *proc, run func() (int64, string)) {
			in := inline()
			wall, cpu, n, id := timed(t, p, run)
			keep(name, result{wall, cpu}, n)
			ratios[name] = append(ratios[name], wall.Seconds()/in.Seconds())
			consoleCall(t, p.base, "DELETE", "/console/api/transfers/"+id, tok, "", http.StatusOK, nil)
		}
		for range rounds {
			for _, s := range servers {
				pair("fetch, "+s.name, s.p, func() (int64, string) { return fetchRun(t, s.bin, s.p, tok, q.sql, dir) })
				pair("/all, "+s.name, s.p, func() (int64, string) { return allRun(t, s.p, tok, q.sql, dir) })
			}
		}
		in := best["inline"]
		t.Logf("block transport, %d rows (%d MB): inline stream (/rest/sql) wall %.3f s, server CPU %.3f s (best of %d)",
			q.rows, size/1_000_000, in.wall.Seconds(), in.cpu.Seconds(), rounds*len(names))
		for _, name := range names {
			r := best[name]
			t.Logf("block transport, %d rows: export call + %-33s median of %d paired ratios %.2f× the inline stream (target ≤ 1.10); best wall %.3f s = %.2f×, its server CPU %.3f s = %.2f×",
				q.rows, name+":", len(ratios[name]), median(ratios[name]), r.wall.Seconds(), r.wall.Seconds()/in.wall.Seconds(), r.cpu.Seconds(), r.cpu.Seconds()/in.cpu.Seconds())
		}
	}
}

// median is the middle of xs (the mean of the middle two when even).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// timed runs run and returns its wall time, the CPU time p took meanwhile
// and what run returned (the bytes it wrote, its transfer).
func timed(t *testing.T, p *proc, run func() (int64, string)) (time.Duration, time.Duration, int64, string) {
	t.Helper()
	cpu0 := procCPU(t, p.cmd.Process.Pid)
	start := time.Now()
	n, id := run()
	wall := time.Since(start)
	return wall, procCPU(t, p.cmd.Process.Pid) - cpu0, n, id
}

// procCPU is the user and system time process pid has taken.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// inlineRun streams sql's rows from /rest/sql as ndjson to a file and
// returns the bytes written.
func inlineRun(t *testing.T, p *proc, tok, sql, dir string) int64 {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"database": "bench", "sql": sql, "format": "ndjson"})
	resp, err := httpClient(tok).Post(p.base+"/rest/sql", "application/json", strings.NewReader(string(body)))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/rest/sql: %v %v", resp, err)
	}
	defer resp.Body.Close()
	return toFile(t, resp.Body, filepath.Join(dir, "inline.ndjson"))
}

// fetchRun exports sql and fetches its blocks with `lakegate fetch` to a
// file, and returns the bytes written and the transfer.
func fetchRun(t *testing.T, bin string, p *proc, tok, sql, dir string) (int64, string) {
	t.Helper()
	out := filepath.Join(dir, "fetch.ndjson")
	cmd := exec.CommandContext(t.Context(), bin, "fetch", "--database", "bench", "--sql", sql, "-o", out, "--parallel", "4")
	cmd.Env = binaryEnv("LAKEGATE_SERVER="+p.base, "LAKEGATE_TOKEN="+tok)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lakegate fetch: %v\n%s", err, b)
	}
	id := transferID.FindSubmatch(b)
	st, err := os.Stat(out)
	if err != nil || id == nil {
		t.Fatalf("lakegate fetch: %v, no transfer named in %s", err, b)
	}
	_ = os.Remove(out)
	return st.Size(), string(id[1])
}

// transferID finds the transfer lakegate fetch names.
var transferID = regexp.MustCompile(`transfer ([0-9a-f]{32})`)

// allRun exports sql over Streamable HTTP, reads its transfer with one GET
// of /all as soon as the export's job names it, writing it to a file and
// checking its SHA-256 against the trailer, and returns the bytes written
// and the transfer.
func allRun(t *testing.T, p *proc, tok, sql, dir string) (int64, string) {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{Endpoint: p.base + "/mcp", HTTPClient: httpClient(tok)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "run_sql", Arguments: map[string]any{
		"database": "bench", "sql": sql, "export": true, "max_rows": 0, "format": "ndjson"}})
	id, job := "", ""
	for err == nil && !res.IsError && id == "" {
		var st struct {
			Job struct {
				ID       string `json:"job_id"`
				State    string `json:"state"`
				Transfer string `json:"transfer_id"`
			} `json:"job"`
			Transfer struct {
				ID string `json:"transfer_id"`
			} `json:"transfer"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err = json.Unmarshal(raw, &st); err != nil {
			break
		}
		id, job = st.Transfer.ID+st.Job.Transfer, st.Job.ID
		if id == "" && st.Job.State == "running" {
			res, err = cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": st.Job.ID, "wait_s": 1}})
		} else if id == "" {
			err = fmt.Errorf("no transfer: %s", raw)
		}
	}
	if err != nil || res.IsError {
		t.Fatalf("export: %v %v", err, res)
	}
	resp, err := httpClient(tok).Get(p.base + mcp.BlocksPath + "/" + id + "/all")
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable && job != "" {
		// A build whose /all waits for the end: wait for it, then read.
		resp.Body.Close()
		if _, err = cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "job_status", Arguments: map[string]any{"job_id": job, "wait_s": 25}}); err == nil {
			resp, err = httpClient(tok).Get(p.base + mcp.BlocksPath + "/" + id + "/all")
		}
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /all: %v %v", resp, err)
	}
	defer resp.Body.Close()
	sum := sha256.New()
	n := toFile(t, io.TeeReader(resp.Body, sum), filepath.Join(dir, "all.ndjson"))
	if got, want := hex.EncodeToString(sum.Sum(nil)), resp.Header.Get("X-Content-Sha256")+resp.Trailer.Get("X-Content-Sha256"); got != want {
		t.Fatalf("GET /all: sha256 %s, the server says %q", got, want)
	}
	return n, id
}

// toFile copies r to a new file at path, removes it, and returns the
// bytes copied.
func toFile(t *testing.T, r io.Reader, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	_ = os.Remove(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
