#!/usr/bin/env bash
# Prints the path of a Go toolchain new enough to build the control plane,
# installing one if needed. Only package registries are used:
#   - a Go >= 1.21 already on PATH switches itself to the version go.mod asks
#     for (GOTOOLCHAIN=auto fetches it from the Go module proxy);
#   - otherwise Debian's golang-go is installed, and the toolchain module
#     golang.org/toolchain is fetched with it from the Go module proxy.
set -euo pipefail
want=1.26.8   # any release >= the `go` line of go.mod works
cache=${OPKIT_CACHE:-$HOME/.cache/opkit}

go_minor() { "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }

if command -v go >/dev/null 2>&1 && [ "$(go_minor go)" -ge 21 ] 2>/dev/null; then
  command -v go
  exit 0
fi

local_go="$cache/go$want/bin/go"
if [ -x "$local_go" ]; then
  echo "$local_go"
  exit 0
fi

# One install at a time (`make test` builds the Go parts in parallel);
# another may have finished while we waited.
mkdir -p "$cache"
exec 9>"$cache/.go$want.lock"
flock 9
if [ -x "$local_go" ]; then
  echo "$local_go"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ensure-go: no Go on PATH; installing Debian's golang-go to bootstrap" >&2
  "$(dirname "$0")/../apt-install.sh" golang-go
fi
arch=$(go env GOARCH)
echo "ensure-go: fetching the Go $want toolchain from the Go module proxy" >&2
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
dir=$(cd "$tmp" && GOFLAGS=-mod=mod GOPATH="$tmp/gopath" GOTOOLCHAIN=local go mod download -json \
  "golang.org/toolchain@v0.0.1-go$want.linux-$arch" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { echo "ensure-go: could not download golang.org/toolchain" >&2; exit 1; }
mkdir -p "$cache"
rm -rf "$cache/go$want"
cp -r "$dir" "$cache/go$want"
# Module zips carry no file modes: make the toolchain's programs executable.
chmod -R u+w "$cache/go$want"
chmod +x "$cache/go$want"/bin/* "$cache/go$want"/pkg/tool/*/*
"$local_go" version >&2
echo "$local_go"
