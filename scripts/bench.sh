#!/usr/bin/env bash
# Runs cutline's bench command (cmd/cutline-bench): one Markdown table of
# the performance figures, each beside its reference measured in the same
# run, with the machine on top (a few minutes on 2 cores). Arguments go to
# the command: -json, -quick, -only fence,mint, …
#
# With MICRO=1 it then runs the packages' micro-benchmarks (go test -bench,
# several more minutes) and prints a second table: each benchmark with its
# time per operation and every metric it reports. Request and round counts
# do not depend on the machine; times and rates do, so compare them as
# ratios measured in one run.
#
#   bash scripts/bench.sh                 # the figures
#   bash scripts/bench.sh -json           # the figures as JSON
#   MICRO=1 BENCHTIME=3x bash scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-servers.sh >/dev/null
export PATH="$(go env GOPATH)/bin:$PATH"
benchtime=${BENCHTIME:-1s}

go -C cmd/cutline-bench run . "$@"
[ "${MICRO:-}" = 1 ] || exit 0
echo

run() { # dir, packages and flags; a failing run is shown whole on stderr
  local dir=$1 out; shift
  out=$(mktemp)
  if ! (cd "$dir" && go test -run '^$' -benchtime "$benchtime" -benchmem "$@") >"$out" 2>&1; then
    cat "$out" >&2
    echo "FAIL: go test -bench in $dir $*"
  fi
  grep -E '^(pkg:|Benchmark)' "$out" || true
  rm -f "$out"
}

echo "| package and benchmark                                          | results |"
echo "|---|---|"
{
  run . -bench 'AppendMem|RawMem|AppendLatency' ./chain/
  run . -bench 'AppendHeap' -benchtime 1x ./chain/
  run . -bench . ./fence/
  run . -bench . ./settle/
  run . -bench . ./roll/
  run . -bench . ./objstore/memblob/ ./objstore/fs/ ./objstore/s3/
  run objstore/gcs -bench . .
  run internal/integration -bench . ./etcdstore/
} | awk '
  /^pkg:/ { pkg = $2; sub(/^github.com\/cutline\/cutline\/?/, "", pkg); next }
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
    name = pkg " " name
    out = ""
    for (i = 3; i < NF; i += 2) out = out sprintf("%s %s   ", $i, $(i+1))
    printf "| %-62s | %s|\n", name, out
    next
  }
  /^FAIL/ { print; failed = 1 }
  END { exit failed }
'
