// Package blocktransport moves results too large for one message. A Store
// keeps each transfer as block files under a spool directory: a Writer
// cuts the encoded stream between writes (so blocks end on a row), sums
// every block and the whole with SHA-256, and holds to byte budgets; a
// transfer expires after a TTL. ServeBlock and ServeAll serve blocks over
// HTTP (any version, HTTP/3 included), and a Client fetches the blocks of
// a transfer in parallel and writes them in order, checking every one.
//
// It moves bytes only: it imports nothing about SQL, MCP, auth or the
// operators' views (of lakegate's packages, the kernel's log keys only);
// callers decide who may read a transfer and convert what List reports.
// Its errors are in errors.go; callers map them to their own answers.
package blocktransport
