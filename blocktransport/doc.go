// Package blocktransport moves results too large for one message. A Store
// keeps each transfer as block files under a spool directory: a Writer
// cuts the encoded stream between writes (so blocks end on a row), sums
// every block and the whole with SHA-256, and holds to byte budgets; a
// transfer expires after a TTL. ServeBlock and ServeAll serve blocks over
// HTTP (any version, HTTP/3 included), and a Client fetches the blocks of
// a transfer in parallel and writes them in order, checking every one.
//
// It moves bytes only: it imports nothing about SQL, MCP or auth; callers
// decide who may read a transfer.
package blocktransport
