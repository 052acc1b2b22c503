package blocktransport

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
)

// castagnoli is the CRC-32C table: each block's check. The CPU computes
// it (SSE 4.2, ARMv8 CRC) at many times SHA-256's speed.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcHex is a CRC-32C as the manifest spells it: 8 hex digits, big-endian.
func crcHex(sum uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return hex.EncodeToString(b[:])
}

// Verify checks that data is block b: its size and its CRC-32C.
func Verify(data []byte, b Block) error {
	if got := crcHex(crc32.Checksum(data, castagnoli)); int64(len(data)) != b.Size || got != b.CRC32C {
		return &ChecksumError{Want: b.CRC32C, Got: got, WantSize: b.Size, GotSize: int64(len(data))}
	}
	return nil
}
