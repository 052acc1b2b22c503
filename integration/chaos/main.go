// Command chaos runs attacks on lakegate servers on loopback and says what
// each did. `make chaos` runs `chaos all`: each attack starts a lakegate
// server of its own from the built binary on a loaded PostgreSQL database,
// attacks it, stops it, and prints one line with its figures (FAILED and
// why when the server broke a promise or the attack could not run). The
// integration tests run the slowloris child on its own, which prints JSON.
//
//	chaos all -bin bin/lakegate -db postgres://... [slowloris trickle noisy vanish stale sigterm oversized slowsse]
//	chaos slowloris -target 127.0.0.1:8080 [-conns N -from 127.0.0.2 -addrs N -hold D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos all|slowloris [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "all":
		err = runAll(os.Args[2:])
	case "slowloris":
		err = slowloris(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// attack is one attack: it starts its own server and returns its figures
// as a line of text, with an error when it failed (the figures it has
// then, if any, still say what it saw).
type attack struct {
	id   string // its name on the command line
	name string // its name in the report
	run  func(ctx context.Context, e *env) (string, error)
}

func attacks() []attack {
	return []attack{
		{"slowloris", "slowloris", flood},
		{"trickle", "trickling bodies", trickle},
		{"noisy", "noisy reader", noisyReader},
		{"vanish", "vanished client", vanishedClient},
		{"stale", "stale sessions", staleSessions},
		{"sigterm", "SIGTERM mid-query", sigtermMidQuery},
		{"oversized", "oversized inputs", oversizedInputs},
		{"slowsse", "slow SSE reader, 100 × 9 MB run_sql", slowSSEReader},
	}
}

// attackTimeout bounds each attack, so that the whole run is bounded.
const attackTimeout = time.Minute

// runAll runs the attacks named in args (all of them when none is), one
// after the other, each to its end whatever the others did.
func runAll(args []string) error {
	fs := flag.NewFlagSet("all", flag.ExitOnError)
	bin := fs.String("bin", "bin/lakegate", "the lakegate binary")
	db := fs.String("db", "", "URL of a PostgreSQL database loaded from integration/testdata/iot.sql")
	_ = fs.Parse(args)
	if *db == "" {
		return errors.New("all: -db is required")
	}
	chosen := attacks()
	if names := fs.Args(); len(names) > 0 {
		chosen = nil
		for _, n := range names {
			i := slices.IndexFunc(attacks(), func(a attack) bool { return a.id == n })
			if i < 0 {
				return fmt.Errorf("all: unknown attack %q", n)
			}
			chosen = append(chosen, attacks()[i])
		}
	}
	// Ctrl-C ends the attack under way through its context, so that its
	// servers and child processes are still stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := newEnv(*bin, *db)
	start, failed := time.Now(), 0
	for _, a := range chosen {
		actx, cancel := context.WithTimeout(ctx, attackTimeout)
		figure, err := a.run(actx, e)
		cancel()
		switch {
		case err == nil:
			fmt.Printf("%s: %s\n", a.name, figure)
		case figure == "":
			failed++
			fmt.Printf("%s: FAILED: %v\n", a.name, err)
		default:
			failed++
			fmt.Printf("%s: %s; FAILED: %v\n", a.name, figure, err)
		}
	}
	fmt.Fprintf(os.Stderr, "chaos: %d attacks in %.1f s, %d failed\n", len(chosen), time.Since(start).Seconds(), failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d attacks failed", failed, len(chosen))
	}
	return nil
}

func errorIsClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
