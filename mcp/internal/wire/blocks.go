package wire

import (
	"net/url"
	"strconv"
	"strings"
)

// BlocksPath is where the plugin serves the block transport's routes: a
// transfer's manifest at BlocksPath/ID, its blocks at BlocksPath/ID/N
// and BlocksPath/ID/all.
const BlocksPath = "/mcp/blocks"

// ProfileMetaKey, set to false in a tools/call's _meta, asks that a
// result going to blocks be written without its profile: a program that
// only downloads the rows (lakegate fetch) saves the server the work.
const ProfileMetaKey = "lakegate/profile"

// BlockTemplate is the URI template of block resources.
const BlockTemplate = "lakegate://transfers/{id}/blocks/{n}"

// BlockURI is the resource URI of block n of transfer id.
func BlockURI(id string, n int) string {
	return "lakegate://transfers/" + url.PathEscape(id) + "/blocks/" + strconv.Itoa(n)
}

// ParseBlockURI reads lakegate://transfers/{id}/blocks/{n}.
func ParseBlockURI(uri string) (id string, n int, ok bool) {
	rest, found := strings.CutPrefix(uri, "lakegate://transfers/")
	if !found {
		return "", 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "blocks" {
		return "", 0, false
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return parts[0], n, true
}
