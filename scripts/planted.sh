#!/usr/bin/env bash
# Plants each variant of internal/planted for a whole run of the tests of
# the packages that must catch it (Bug.CaughtBy, printed by
# internal/planted/variants), and requires every such run to end in a
# FAIL within a minute: a run that passes missed the variant, and one
# that times out hangs where it should fail, which hides what failed.
#
# The test binaries are built without -race: the race detector runs these
# tests several times slower, which would break the one-minute bound and
# the few minutes this script may take. Each binary is built once and run
# for every variant. With nothing planted the same tests must pass, or a
# failure proves nothing: scripts/test.sh runs them first, with -race, and
# stops when one fails; run them so before this script when running it
# alone.
#
# Usage: scripts/planted.sh [variant...]   (default: every variant)
set -euo pipefail
cd "$(dirname "$0")/.."

limit=60 # seconds a run may take
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A want=()
if [ $# -gt 0 ]; then
  for v in "$@"; do want[$v]=1; done
fi
declare -a variants=()
declare -A caught_by=()
while read -r name pkgs; do
  if [ $# -gt 0 ] && [ -z "${want[$name]:-}" ]; then continue; fi
  variants+=("$name")
  caught_by[$name]=$pkgs
  unset "want[$name]"
done < <(go run ./internal/planted/variants)
if [ ${#want[@]} -gt 0 ]; then
  echo "planted: no such variant: ${!want[*]}" >&2
  exit 2
fi

# bin DIR prints the path of DIR's test binary.
bin() { echo "$work/$(echo "$1" | tr / _).test"; }

# Build every package's test binary once, in the module of the nearest
# go.mod above it.
declare -A built=()
for v in "${variants[@]}"; do
  for p in ${caught_by[$v]}; do
    dir=${p%%=*}
    [ -n "${built[$dir]:-}" ] && continue
    built[$dir]=1
    mod=$dir
    while [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
    pkg=.
    [ "$mod" != "$dir" ] && pkg=./${dir#"$mod"/}
    (cd "$mod" && go test -c -tags cutline_planted -o "$(bin "$dir")" "$pkg")
  done
done

# run VARIANT DIR PATTERN: runs DIR's tests (those PATTERN matches, when
# not empty) with VARIANT planted, and prints the outcome: pass, fail,
# hang; the output is left in $work/out.
run() {
  local v=$1 dir=$2 pattern=$3
  local args=(-test.failfast -test.count=1 -test.timeout="${limit}s" -test.skip '^TestPlanted$')
  [ -n "$pattern" ] && args+=(-test.run "$pattern")
  local rc=0
  (cd "$dir" && CUTLINE_PLANTED=$v timeout -k 5 $((limit + 10)) "$(bin "$dir")" "${args[@]}") >"$work/out" 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then
    echo pass
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -q '^panic: test timed out' "$work/out"; then
    echo hang
  elif grep -q -- '--- FAIL\|^FAIL' "$work/out"; then
    echo fail
  else
    echo "error $rc"
  fi
}

status=0
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

echo "=== each variant planted: every package it names fails within ${limit}s"
for v in "${variants[@]}"; do
  for p in ${caught_by[$v]}; do
    dir=${p%%=*}
    pattern=""
    [ "$p" != "$dir" ] && pattern=${p#*=}
    start=$(now)
    got=$(run "$v" "$dir" "$pattern")
    took=$(secs "$start" "$(now)")
    # The innermost test of the first failure, which names the check.
    first=$(awk '$1 == "---" && $2 == "FAIL:" {
        if (name == "" || index($3, name "/") == 1) { name = $3; next }
        exit
      }
      END { print name }' "$work/out")
    echo "$v $dir: $got in ${took}s${first:+ ($first)}"
    if [ "$got" != fail ]; then
      tail -40 "$work/out"
      status=1
    fi
  done
done
exit $status
