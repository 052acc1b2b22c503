#!/usr/bin/env bash
# sdkpatched.sh GO OUT: builds lakegate from this tree into OUT against
# the go-sdk it requires with testdata/gosdk-decode.patch applied (go-sdk
# decodes a message's params from the bytes it holds, where v1.8.0 copies
# them into a new 32 KiB buffer for every decode). make bench measures
# that build beside this one: what the change would save once go-sdk
# takes it; go-sdk's own tests of its JSON package run on the patched copy
# first. Nothing else builds with it.
set -euo pipefail
GO="${1:?usage: sdkpatched.sh GO OUT}"; out="${2:?usage: sdkpatched.sh GO OUT}"
here="$(cd "$(dirname "$0")" && pwd)"; root="$(dirname "$here")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sdk="$(cd "$root" && "$GO" list -m -f '{{.Dir}}' github.com/modelcontextprotocol/go-sdk)"
cp -r "$sdk" "$tmp/go-sdk"
chmod -R u+w "$tmp/go-sdk"
(cd "$tmp/go-sdk" && git apply "$here/testdata/gosdk-decode.patch" && "$GO" test -count=1 ./internal/json/ >/dev/null)
cp "$root/go.mod" "$tmp/go.mod"
cp "$root/go.sum" "$tmp/go.sum"
echo "replace github.com/modelcontextprotocol/go-sdk => $tmp/go-sdk" >> "$tmp/go.mod"
(cd "$root" && "$GO" build -modfile="$tmp/go.mod" -o "$out" ./cmd/lakegate)
