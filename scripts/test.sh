#!/usr/bin/env bash
# Runs every test of every module in this repository with -race, against the
# real servers: it installs versitygw (S3) if it is missing; the tests start
# their own server processes (versitygw per zone, embedded etcd, the GCS
# emulator) on 127.0.0.1 and stop them. With CI=true a real-backend test whose
# server cannot be started fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-servers.sh
export PATH="$(go env GOPATH)/bin:$PATH"

status=0
for mod in $(git ls-files '*go.mod' 2>/dev/null || find . -name go.mod); do
  dir=$(dirname "$mod")
  echo "=== module $dir"
  (
    cd "$dir"
    test -z "$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
    go vet ./...
    go test -race -count=1 -timeout 20m -v ./... 2>&1
  ) || status=1
done
exit $status
