package query

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
)

func TestCreateDemo(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "sub", "b.db")
	for _, p := range []string{a, b} {
		if err := CreateDemo(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	// Deterministic: the same data set twice.
	e, err := Open(t.Context(), []config.Database{{Name: "a", URL: "sqlite:" + a}, {Name: "b", URL: "sqlite:" + b}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	q := "SELECT count(*), sum(id * temperature), count(power_w), count(note), min(ts), max(ts) FROM readings"
	_, ra := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "a", SQL: q})
	_, rb := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "b", SQL: q})
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("got %v and %v, want the same data", ra, rb)
	}
	if ra[0][0] != int64(demoReadings) || ra[0][2] == ra[0][0] || ra[0][3] == int64(0) {
		t.Errorf("got %v, want %d readings with some NULL power and some notes", ra[0], demoReadings)
	}
	// No temporary files left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("got %d entries in %s, want a.db and sub", len(entries), dir)
	}
	// An existing file is left alone.
	before, _ := os.ReadFile(a)
	if err := CreateDemo(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(a)
	if !bytes.Equal(before, after) {
		t.Error("CreateDemo changed an existing file")
	}
}

func TestCreateDemoErrors(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := filepath.Join(dir, "c.db")
	if err := CreateDemo(ctx, p); err == nil {
		t.Error("canceled context: got nil, want an error")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("canceled context: got %v for the file, want it absent", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("got %d leftover files, want none", len(entries))
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := CreateDemo(t.Context(), filepath.Join(file, "x.db")); err == nil {
		t.Error("parent is a file: got nil, want an error")
	}
}
