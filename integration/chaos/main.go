// Command chaos runs attacks on a lakegate server on loopback and prints
// what each did, one JSON line per attack. `make chaos` runs them all
// against a server it starts; the integration tests run some of them.
//
//	chaos slowloris -target 127.0.0.1:8080 [-conns N -from 127.0.0.2 -addrs N -hold D]
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos slowloris [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "slowloris":
		err = slowloris(os.Args[2:])
	default:
		err = fmt.Errorf("unknown attack %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func errorIsClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
