#!/usr/bin/env bash
# Build the fuzz targets and run each for a time budget; print, per target, the executions,
# the coverage libFuzzer reached (cov: edges, ft: features) and whether it found a crash.
#
#   fuzz/run.sh [--build-only] [SECONDS] [TARGET...]     (default: 60 s, every target)
#   fuzz/run.sh --device-bin [DIR]     (binaries for device_run.sh, default DIR fuzz/device_bin)
#
# `make fuzz FUZZ_SECONDS=300` and `make fuzz-build` call it. Each target first runs the inputs
# of fuzz/regressions/<target>/ (bugs found before), then fuzzes from fuzz/seeds/<target>/ (and
# those). New corpus entries go to fuzz/corpus/<target>/ (ignored by git), crash inputs to
# fuzz/artifacts/<target>/, logs to fuzz/logs/<target>.log. Exits 1 if a target crashed or a
# regression input failed (all targets run regardless). Needs the nightly toolchain
# (`cargo +nightly`); installs cargo-fuzz when missing. FUZZ_SANITIZER=none builds without
# AddressSanitizer (about twice the executions per second; the default `address` also checks
# unsafe code).
set -euo pipefail

FUZZ_DIR=$(cd "$(dirname "$0")" && pwd)
cd "$FUZZ_DIR"
ALL_TARGETS=(json_row jsonl_reader parquet_reader npy_header tokenizer_json fast_encoder seen_hashes compressed_parts gzip_points prepare_cuts prepare_clean unigram_em)
SANITIZER=${FUZZ_SANITIZER:-address}
# The root Makefile exports CARGO_TARGET_DIR for the main crate; the fuzz builds (other flags,
# other toolchain) get their own folder, where device_run.sh's users find the binaries.
export CARGO_TARGET_DIR="$FUZZ_DIR/target"
# The encoders' load cache of the tokenizers the targets make up (a file each) goes beside the
# builds, not into the user's ~/.cache.
export DATA_IO_ENCODER_CACHE="${DATA_IO_ENCODER_CACHE:-$CARGO_TARGET_DIR/encoder-cache}"
BIN_DIR="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

build_only=0
if [ "${1:-}" = "--build-only" ]; then
    build_only=1
    shift
fi
if [ "${1:-}" = "--device-bin" ]; then
    # Binaries for device_run.sh (another machine, no toolchain): no AddressSanitizer (half the
    # size, twice the exec/s; debug assertions and overflow checks stay), in their own target
    # folder, debug info stripped (symbols kept: panics still name their functions), gzipped.
    out=${2:-$FUZZ_DIR/device_bin}
    cargo +nightly fuzz build -s none --target-dir "$FUZZ_DIR/target/device"
    mkdir -p "$out"
    for target in "${ALL_TARGETS[@]}"; do
        strip --strip-debug -o "$out/$target" \
            "$FUZZ_DIR/target/device/x86_64-unknown-linux-gnu/release/$target"
        gzip -9f "$out/$target"
    done
    ls -l "$out"
    du -sh "$out"
    exit 0
fi
seconds=${1:-${FUZZ_SECONDS:-60}}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")

echo "== building ${targets[*]} (sanitizer: $SANITIZER)"
if [ ${#targets[@]} -eq ${#ALL_TARGETS[@]} ]; then
    cargo +nightly fuzz build -s "$SANITIZER"
else
    for target in "${targets[@]}"; do
        cargo +nightly fuzz build -s "$SANITIZER" "$target"
    done
fi
[ $build_only = 1 ] && { ls -l "${targets[@]/#/$BIN_DIR/}"; exit 0; }

mkdir -p logs
crashed=0
summary=()
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target" "artifacts/$target"
    dict=()
    [ -f "dicts/$target.dict" ] && dict=("-dict=dicts/$target.dict")
    inputs=("corpus/$target" "seeds/$target")
    if compgen -G "regressions/$target/*" >/dev/null; then
        # The inputs of the bugs found so far: each must run clean, then seeds the run.
        if ! "$BIN_DIR/$target" -timeout=60 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
            regressions/"$target"/* >"logs/$target.regressions.log" 2>&1; then
            echo "== $target: REGRESSION, an input of fuzz/regressions/$target fails (logs/$target.regressions.log)"
            crashed=1
        fi
        inputs+=("regressions/$target")
    fi
    echo "== $target: ${seconds}s"
    set +e
    # -timeout: a unit running longer is a hang (the fast_encoder's first unit builds its
    # encoders); -rss_limit_mb / -malloc_limit_mb: a unit taking more memory, or asking for
    # more than 2 GiB at once (a length field read from the input), is a finding too.
    "$BIN_DIR/$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=60 \
        -rss_limit_mb=4096 -malloc_limit_mb=2048 -artifact_prefix="artifacts/$target/" "${dict[@]}" \
        "${inputs[@]}" >"logs/$target.log" 2>&1
    rc=$?
    set -e
    log="logs/$target.log"
    last() { grep -oE "$1" "$log" | tail -1 | grep -oE '[^ ]+$' || true; }
    execs=$(last 'stat::number_of_executed_units: +[0-9]+')
    rate=$(last 'stat::average_exec_per_sec: +[0-9]+')
    cov=$(last 'cov: [0-9]+')
    ft=$(last 'ft: [0-9]+')
    corp=$(last 'corp: [0-9]+')
    artifact=$(last 'Test unit written to [^ ]+')
    if [ $rc -ne 0 ] || [ -n "$artifact" ]; then
        crashed=1
        result="CRASH (exit $rc): ${artifact:-see $log}"
        grep -m1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" || true
    else
        result="no crash"
    fi
    line=$(printf '%-15s execs %-10s exec/s %-7s cov %-6s ft %-7s corpus %-5s %s' \
        "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result")
    echo "$line"
    summary+=("$line")
done

echo "== summary (${seconds}s per target, sanitizer $SANITIZER, $(date -u +%Y-%m-%dT%H:%MZ))"
printf '%s\n' "${summary[@]}"
exit $crashed
