package validate

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// hostileEntry is one entry of testdata/hostile.txt.
type hostileEntry struct {
	desc, want, sql string
}

// readHostile parses testdata/hostile.txt; its header describes the format.
func readHostile(t testing.TB) []hostileEntry {
	t.Helper()
	data, err := os.ReadFile("testdata/hostile.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	i := 0
	for i < len(lines) && lines[i] != "----" { // header
		i++
	}
	i++
	var entries []hostileEntry
	var cur hostileEntry
	var sql []string
	inSQL := false
	for ; i < len(lines); i++ {
		line := lines[i]
		switch {
		case line == "----":
			cur.sql = strings.Join(sql, "\n")
			entries = append(entries, cur)
			cur, sql, inSQL = hostileEntry{}, nil, false
		case !inSQL && strings.HasPrefix(line, "# want: "):
			cur.want = strings.TrimPrefix(line, "# want: ")
		case !inSQL && strings.HasPrefix(line, "# "):
			if cur.desc == "" {
				cur.desc = strings.TrimPrefix(line, "# ")
			}
		default:
			inSQL = true
			sql = append(sql, line)
		}
	}
	if inSQL || cur.desc != "" {
		t.Fatalf("testdata/hostile.txt: last entry %q is not ended by ----", cur.desc)
	}
	return entries
}

// generatedHostile are hostile inputs that are not stored in hostile.txt.
func generatedHostile() []hostileEntry {
	return []hostileEntry{
		{"NUL byte ending a string early in C code", "NUL", "SELECT 'a\x00'; DROP TABLE t"},
		{"NUL byte between statements", "NUL", "SELECT 1\x00; DROP TABLE t"},
		{"carriage return ends a line comment", "only one statement", "SELECT 1 -- c\r; DROP TABLE t"},
		{"input over 100,000 bytes", "too long", "SELECT 1 FROM t WHERE a IN (" + strings.Repeat("1, ", 40_000) + "1)"},
		{"long input padded with a comment", "too long", "SELECT 1 /*" + strings.Repeat("x", maxLen) + "*/"},
		{"parentheses nested 65 deep", "nested too deeply", "SELECT " + strings.Repeat("(", 65) + "1" + strings.Repeat(")", 65)},
		{"parentheses nested 10,000 deep", "nested too deeply", "SELECT " + strings.Repeat("(", 10_000) + "1" + strings.Repeat(")", 10_000)},
		{"invalid UTF-8", "UTF-8", "SELECT 1 FROM t WHERE a = '\xff'"},
	}
}

func TestHostileCorpus(t *testing.T) {
	entries := readHostile(t)
	if len(entries) < 60 {
		t.Fatalf("got %d entries in testdata/hostile.txt, want at least 60", len(entries))
	}
	entries = append(entries, generatedHostile()...)
	allow := &Options{AllowTable: func(TableRef) bool { return true }}
	for _, e := range entries {
		t.Run(e.desc, func(t *testing.T) {
			if e.sql == "" {
				t.Fatalf("entry has no SQL")
			}
			for _, opts := range []*Options{nil, allow} {
				st, err := Check(e.sql, opts)
				if err == nil {
					t.Fatalf("Check(%q) = %+v, nil; want an error", e.sql, st)
				}
				var verr *Error
				if !errors.As(err, &verr) {
					t.Fatalf("got %T, want *Error", err)
				}
				if verr.Reason == "" || verr.Hint == "" {
					t.Errorf("got Reason %q, Hint %q; want both set", verr.Reason, verr.Hint)
				}
				if e.want != "" && !strings.Contains(strings.ToLower(verr.Reason), strings.ToLower(e.want)) {
					t.Errorf("got reason %q, want it to contain %q", verr.Reason, e.want)
				}
			}
		})
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	sql := "SELECT " + strings.Repeat("(", maxDepth) + "1" + strings.Repeat(")", maxDepth)
	if _, err := Check(sql, nil); err != nil {
		t.Errorf("got %v, want nil at depth %d", err, maxDepth)
	}
	sql = "SELECT 1 FROM t WHERE a = '" + strings.Repeat("x", maxLen-28) + "'"
	if len(sql) != maxLen {
		t.Fatalf("test input is %d bytes, want %d", len(sql), maxLen)
	}
	if _, err := Check(sql, nil); err != nil {
		t.Errorf("got %v, want nil for exactly %d bytes", err, maxLen)
	}
}
