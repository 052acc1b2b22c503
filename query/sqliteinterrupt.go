package query

import (
	"context"
	"database/sql"
	"reflect"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The SQLite driver interrupts a statement when its context ends only
// while the statement computes its first row: the steps behind rows.Next
// are not watched, and an interrupt that lands before the first step
// starts is lost (sqlite3_interrupt does nothing while no statement
// runs). Either way a cancelled or timed-out query would run on to its
// end, holding a worker and a connection. interruptOnDone closes both
// gaps: once the context ends it interrupts the connection again and
// again until the run returns.

// interruptEvery is how often a connection whose context has ended is
// interrupted until its statement returns.
const interruptEvery = 10 * time.Millisecond

// interruptOnDone interrupts conn's statement, repeatedly, from when ctx
// ends until stop is called; stop returns once no interrupt can come any
// more, so that the connection can go back to the pool. On a driver
// connection it does not know (not modernc.org/sqlite's) it does nothing.
func interruptOnDone(ctx context.Context, conn *sql.Conn) (stop func()) {
	db := sqliteHandle(conn)
	if db == 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		t := time.NewTicker(interruptEvery)
		defer t.Stop()
		for {
			// A TLS of its own: the statement runs on the connection's.
			tls := libc.NewTLS()
			sqlite3.Xsqlite3_interrupt(tls, db)
			tls.Close()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// sqliteHandle is the sqlite3* of conn's driver connection: the field db
// of modernc.org/sqlite's connection (the version go.mod pins), read while
// the connection is idle; 0 if it is not there.
func sqliteHandle(conn *sql.Conn) uintptr {
	var db uintptr
	_ = conn.Raw(func(dc any) error {
		v := reflect.ValueOf(dc)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		if f := v.Elem().FieldByName("db"); f.IsValid() && f.Kind() == reflect.Uintptr {
			db = uintptr(f.Uint())
		}
		return nil
	})
	return db
}
