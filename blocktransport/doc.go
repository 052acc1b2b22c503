// Package blocktransport moves results too large for one message: it cuts
// an encoded stream into row-aligned blocks with checksums, keeps them in a
// store with a TTL and a byte budget, serves them over HTTP (and HTTP/3),
// and fetches them back in parallel, verifying every block.
//
// It moves bytes only: it must not import anything about SQL or MCP.
// (Empty for now; the block-transport work fills it.)
package blocktransport
