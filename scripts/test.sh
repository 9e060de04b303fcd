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
    # set -e does not hold inside a subshell whose status is tested: every
    # step says itself whether it failed.
    go vet ./... || exit 1
    go test -race -count=1 -timeout 20m -v ./... 2>&1 || exit 1
    if [ "$dir" = "." ]; then
      # The planted variants (internal/planted): each must be caught by the
      # checks, and with none planted the checks must pass.
      # Allocation counts, without the race detector (it allocates on its own).
      go test -count=1 -run 'TestAppendAllocs' -v ./chain/ 2>&1 || exit 1
      go vet -tags cutline_planted ./... || exit 1
      go test -race -count=1 -timeout 10m -tags cutline_planted -run 'Planted' -v ./fence/ ./internal/sim/ ./internal/modelcheck/ 2>&1 || exit 1
      # Each variant planted for a whole run of the ordinary tests of the
      # packages that must catch it: each run fails within a minute.
      bash scripts/planted.sh || exit 1
    fi
  ) || status=1
done
exit $status
