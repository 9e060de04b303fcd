#!/usr/bin/env bash
# Installs the real servers the tests start: versitygw (S3) into
# $(go env GOPATH)/bin, and Azurite (the Azure Blob Storage emulator, an
# npm package run with node) into ${XDG_CACHE_HOME:-~/.cache}/cutline.
# Embedded etcd, fake-gcs-server and gofakes3 are Go libraries pulled by
# their nested modules. Idempotent: a cached install is reused, and an
# interrupted one is never taken for a finished one.
set -euo pipefail
VERSITYGW_VERSION=v1.8.0
AZURITE_VERSION=3.37.0

bin="$(go env GOPATH)/bin"
if ! "$bin/versitygw" --version >/dev/null 2>&1; then
  echo "installing versitygw $VERSITYGW_VERSION (a few minutes on 2 cores)"
  go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
echo "versitygw: $bin/versitygw"

# internal/testservers looks for Azurite at this path.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/cutline"
azurite="$cache/azurite-$AZURITE_VERSION"
if [ "$("$azurite/node_modules/.bin/azurite-blob" --version 2>/dev/null || true)" != "$AZURITE_VERSION" ]; then
  command -v node >/dev/null || { echo "node is required for Azurite" >&2; exit 1; }
  echo "installing azurite $AZURITE_VERSION (npm, under a minute)"
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/azurite-install.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  npm install --prefix "$tmp" --no-audit --no-fund --omit=dev --ignore-scripts \
    --loglevel=error "azurite@$AZURITE_VERSION" >/dev/null
  rm -rf "$azurite"
  mv "$tmp" "$azurite"
  trap - EXIT
fi
echo "azurite: $azurite/node_modules/.bin/azurite-blob"
