#!/usr/bin/env bash
# make image: builds the lakegate image from deploy/Containerfile with
# podman, or docker when its engine answers. The binary is built here (CGO
# off, so static) and copied in with a passwd/group naming the non-root
# user (uid 65532) and this machine's CA certificates: the image starts
# FROM scratch and runs nothing at build time.
#
#   deploy/image.sh IMAGE VERSION
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
image="${1:?usage: image.sh IMAGE VERSION}" version="${2:-dev}"
go="${GO:-go}"
say() { printf 'image: %s\n' "$*" >&2; }

engine=""
if command -v podman >/dev/null 2>&1; then
  engine=podman
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  engine=docker
else
  say "neither podman nor a running docker engine: apt-get install podman"
  exit 1
fi
cas=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  [[ -s "$f" ]] && { cas="$f"; break; }
done
[[ -n "$cas" ]] || { say "no CA bundle on this machine: apt-get install ca-certificates"; exit 1; }

ctx="$root/bin/image"
rm -rf "$ctx"
mkdir -p "$ctx/etc/ssl/certs" "$ctx/data"
CGO_ENABLED=0 "$go" build -C "$root" -trimpath -ldflags "-s -w -X main.version=$version" -o "$ctx/lakegate" ./cmd/lakegate
printf 'root:x:0:0:root:/root:/sbin/nologin\nlakegate:x:65532:65532:lakegate:/data:/sbin/nologin\n' >"$ctx/etc/passwd"
printf 'root:x:0:\nlakegate:x:65532:\n' >"$ctx/etc/group"
cp "$cas" "$ctx/etc/ssl/certs/ca-certificates.crt"
chmod 644 "$ctx/etc/passwd" "$ctx/etc/group" "$ctx/etc/ssl/certs/ca-certificates.crt"
chmod 755 "$ctx/lakegate"

old="$("$engine" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
"$engine" build --quiet -f "$root/deploy/Containerfile" -t "$image" \
  --label org.opencontainers.image.title=lakegate \
  --label org.opencontainers.image.version="$version" "$ctx" >/dev/null
# The image this tag named before is of no more use here.
new="$("$engine" image inspect --format '{{.Id}}' "$image")"
[[ -n "$old" && "$old" != "$new" ]] && "$engine" image rm "$old" >/dev/null 2>&1 || true
say "$image built with $engine ($(du -k "$ctx/lakegate" | cut -f1) KiB binary)"
