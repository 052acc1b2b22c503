package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Sizes of the demo data set.
const (
	demoDevices  = 50
	demoReadings = 5000
)

const demoSchema = `
CREATE TABLE devices (
  id        INTEGER PRIMARY KEY,
  name      TEXT NOT NULL,
  site      TEXT NOT NULL,
  kind      TEXT NOT NULL,
  installed DATE NOT NULL,
  active    BOOLEAN NOT NULL
);
CREATE TABLE readings (
  id          INTEGER PRIMARY KEY,
  device_id   INTEGER NOT NULL REFERENCES devices(id),
  ts          TIMESTAMP NOT NULL,
  temperature REAL NOT NULL,
  humidity    REAL NOT NULL,
  power_w     NUMERIC(10,2),
  status      TEXT NOT NULL,
  note        TEXT
);
CREATE INDEX readings_device_ts ON readings (device_id, ts);`

// CreateDemo creates an SQLite database at path holding a small IoT data
// set (devices and their readings, modelled on the benchmark's iot.sql and
// just as deterministic) unless a file is already there. It builds a
// temporary file next to path and renames it, so a crash never leaves a
// half-made database behind.
func CreateDemo(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("create demo: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create demo: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create demo: %w", err)
	}
	tmp := f.Name()
	f.Close()
	if err := fillDemo(ctx, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create demo: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create demo: %w", err)
	}
	return nil
}

// fillDemo writes the demo schema and rows into the SQLite file at path.
func fillDemo(ctx context.Context, path string) (err error) {
	db, err := sql.Open("sqlite", sqliteDSN(path, "_pragma=foreign_keys(1)"))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, demoSchema); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := demoRows(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "ANALYZE")
	return err
}

func demoRows(ctx context.Context, tx *sql.Tx) error {
	sites := []string{"berlin", "lisbon", "oslo", "austin", "osaka", "lagos", "lima", "perth"}
	kinds := []string{"thermo", "hygro", "power", "flow"}
	statuses := []string{"ok", "ok", "ok", "ok", "warn", "fail"}
	day0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	ts0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	dev, err := tx.PrepareContext(ctx, "INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer dev.Close()
	for g := 1; g <= demoDevices; g++ {
		installed := day0.AddDate(0, 0, (g*37)%1500).Format(time.DateOnly)
		_, err := dev.ExecContext(ctx, g, fmt.Sprintf("dev-%04d", g), sites[g%8], kinds[(g/8)%4],
			installed, g%11 != 0)
		if err != nil {
			return err
		}
	}

	rd, err := tx.PrepareContext(ctx, "INSERT INTO readings VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer rd.Close()
	for g := 1; g <= demoReadings; g++ {
		var power, note any
		if g%13 != 0 {
			power = float64((g*31)%100000) / 100
		}
		if g%97 == 0 {
			note = fmt.Sprintf("maintenance window %d", g%7)
		}
		ts := ts0.Add(time.Duration(g) * time.Minute).Format(sqlbuild.SQLiteTime)
		_, err := rd.ExecContext(ctx, g, 1+g%demoDevices, ts,
			float64(1500+(g*7919)%2000)/100, float64(3000+(g*104729)%5000)/100,
			power, statuses[g%6], note)
		if err != nil {
			return err
		}
	}
	return nil
}
