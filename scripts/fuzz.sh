#!/usr/bin/env bash
# fuzz.sh [seconds] — run every fuzz target of the root module, one after
# another, for the given time each (default 60), with one fuzzing worker so
# that the machine stays usable, and print a Markdown table: package,
# target, executions, new interesting inputs, result.
#
# Go keeps the inputs it finds interesting in its cache, not in the tree.
# When a target fails, go writes the failing input to
# <package>/testdata/fuzz/<target>/<hash>: the script leaves that file in
# place (it reproduces the failure with `go test -run <target>/<hash>`),
# names it below the table and exits non-zero. Any other file that appears
# under testdata/fuzz during the run is named the same way.
#
# Environment: FUZZ_MATCH, a regular expression, restricts the run to the
# targets whose name matches it (default: all); FUZZ_LOG_DIR keeps each
# target's full output there (default: a temporary directory, removed);
# FUZZ_MINIMIZE_TIME is passed as -fuzzminimizetime (default: go's, 60s).
# Minimizing a new interesting input counts against -fuzztime and adds no
# executions to go's count, so a target that finds much in a short run
# shows few executions.
set -uo pipefail

secs="${1:-60}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
	echo "usage: $0 [seconds]  (a positive whole number of seconds per target)" >&2
	exit 2
fi
match="${FUZZ_MATCH:-.}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
module="$(go list -m)" || exit 2

logs="${FUZZ_LOG_DIR:-}"
if [[ -z "$logs" ]]; then
	logs="$(mktemp -d)"
	trap 'rm -rf "$logs"' EXIT
fi
mkdir -p "$logs"

corpus_files() {
	find . -path '*/testdata/fuzz/*' -type f -not -path './.git/*' | LC_ALL=C sort
}

# List the targets: `go test -list` prints a package's test names, then a
# line "ok <import path> <time>" for that package. A package whose tests do
# not build cannot be listed: it is reported as a failure.
go test -list '^Fuzz' ./... >"$logs/list.txt" 2>&1
list_rc=$?
targets=() # "<dir> <name>"
pending=()
broken=() # import paths whose tests do not build
while IFS= read -r line; do
	case "$line" in
	Fuzz*) pending+=("$line") ;;
	ok*)
		pkg="$(awk '{print $2}' <<<"$line")"
		dir=".${pkg#"$module"}"
		for name in "${pending[@]}"; do
			if [[ "$name" =~ $match ]]; then
				targets+=("$dir $name")
			fi
		done
		pending=()
		;;
	FAIL*"[build failed]"* | FAIL*"[setup failed]"*)
		broken+=("$(awk '{print $2}' <<<"$line")")
		pending=()
		;;
	esac
done <"$logs/list.txt"
if ((list_rc != 0 && ${#broken[@]} == 0)); then
	cat "$logs/list.txt" >&2
	echo "fuzz.sh: listing the fuzz targets failed" >&2
	exit 1
fi
if ((${#targets[@]} == 0)); then
	echo "fuzz.sh: no fuzz target matches $match" >&2
	exit 1
fi

before="$logs/before.txt"
corpus_files >"$before"

echo "Fuzzing ${#targets[@]} targets for ${secs}s each ($(go version | awk '{print $3}'), -parallel 1)." >&2
failed=0
rows=()
notes=()
for pkg in "${broken[@]}"; do
	failed=1
	rows+=("| ${pkg#"$module"/} | (tests do not build) | - | - | FAIL |")
	notes+=("### ${pkg#"$module"/}: tests do not build; its fuzz targets (if any) were not run")
	notes+=('```')
	while IFS= read -r l; do notes+=("$l"); done < <(grep -F "${pkg#"$module"/}/" "$logs/list.txt" | head -n 10)
	notes+=('```')
	echo "  ${pkg#"$module"/}: tests do not build" >&2
done
for t in "${targets[@]}"; do
	dir="${t%% *}"
	name="${t#* }"
	log="$logs/${dir//\//_}.$name.txt"
	start=$SECONDS
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "${secs}s" -parallel 1 -timeout "$((secs + 600))s" \
		${FUZZ_MINIMIZE_TIME:+-fuzzminimizetime "$FUZZ_MINIMIZE_TIME"} "$dir/" >"$log" 2>&1
	rc=$?
	took=$((SECONDS - start))
	# The last progress line: "fuzz: elapsed: 60s, execs: N (R/sec), new interesting: M (total: T)".
	last="$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' "$log" | tail -n 1)"
	execs="$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")"
	interesting="$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 (total \2)/p' <<<"$last")"
	result="PASS"
	if ((rc != 0)); then
		result="FAIL"
		failed=1
		written="$(sed -nE 's/.*Failing input written to (testdata\/fuzz\/[^ ]+).*/\1/p' "$log" | head -n 1)"
		if [[ -n "$written" ]]; then
			result="FAIL (input: ${dir#./}/$written)"
		fi
		notes+=("### ${dir#./} $name failed (exit $rc)")
		notes+=('```')
		while IFS= read -r l; do notes+=("$l"); done < <(grep -vE '^fuzz: elapsed:' "$log" | tail -n 40)
		notes+=('```')
	fi
	rows+=("| ${dir#./} | $name | ${execs:-?} | ${interesting:-?} | $result |")
	echo "  ${dir#./} $name: ${execs:-?} execs, ${took}s, $result" >&2
done

echo
echo "| package | target | executions | new interesting | result |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"

after="$logs/after.txt"
corpus_files >"$after"
new="$(comm -13 "$before" "$after")"
if [[ -n "$new" ]]; then
	failed=1
	echo
	echo "Files go wrote under testdata/fuzz (left in place to reproduce the failure):"
	while IFS= read -r f; do
		echo
		echo "- \`${f#./}\`:"
		echo '```'
		head -c 4096 "$f"
		echo
		echo '```'
	done <<<"$new"
fi
if ((${#notes[@]} > 0)); then
	echo
	printf '%s\n' "${notes[@]}"
fi
exit "$failed"
