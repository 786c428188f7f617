#!/usr/bin/env bash
# Runs every libFuzzer target for FUZZ_SECONDS (default 30) each. Seeds come from Fuzz/corpus/
# (committed, read-only here); what the fuzzer finds goes to .build/fuzz-corpus/<target>, and a
# crashing input to .build/fuzz-artifacts/. Exit status is non-zero if any target crashed.
# Usage: scripts/fuzz.sh [target ...]     (targets: request-parser response-parser chunked cache-control config disk-entry)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${FUZZ_SECONDS:-30}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(request-parser response-parser chunked cache-control config disk-entry)

# -DFUZZING makes main() hand over to libFuzzer's driver; -fsanitize=address covers the C shims.
# Release builds leave out the run-time exclusivity checks (Package.swift); the fuzzer turns
# them back on, since finding an overlapping access is what it is for.
swift build --scratch-path .build/fuzz -c release --product larder-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -enforce-exclusivity=checked \
    -Xcc -fsanitize=address 2>&1 \
    | grep -v "__asan_extra_spill_area" || true
BIN=.build/fuzz/release/larder-fuzz
[ -x "$BIN" ] || { echo "fuzz: build failed" >&2; exit 1; }

mkdir -p .build/fuzz-artifacts
failed=()
for target in "${TARGETS[@]}"; do
    [ -d "Fuzz/corpus/$target" ] || { echo "fuzz: unknown target $target" >&2; exit 2; }
    work=.build/fuzz-corpus/$target
    mkdir -p "$work"
    log=.build/fuzz-artifacts/$target.log
    # timeout is a backstop only: -max_total_time ends the run; a hang inside one input is
    # caught by -timeout (seconds per input) and reported as a crash.
    if FUZZ_TARGET=$target timeout $((SECONDS_EACH + 60)) "$BIN" \
        -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=".build/fuzz-artifacts/$target-" "$work" "Fuzz/corpus/$target" >"$log" 2>&1; then
        echo "fuzz: $target: $(grep -E '^Done' "$log" | tail -1) ($(grep -Eo 'cov: [0-9]+' "$log" | tail -1))"
    else
        echo "fuzz: $target: FAILED, see $log; reproduce with FUZZ_TARGET=$target $BIN <artifact>" >&2
        grep -E "ERROR|Fatal error|Precondition failed|Base64" "$log" | head -5 >&2 || true
        failed+=("$target")
    fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: crashes in: ${failed[*]}" >&2; exit 1; }
