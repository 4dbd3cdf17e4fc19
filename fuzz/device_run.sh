#!/usr/bin/env bash
# Run the already-built fuzz binaries on a many-core machine that has neither network nor a
# Rust toolchain: every target at once, each in libFuzzer's fork mode on its share of the
# cores, for SECONDS; crashes, timeouts and out-of-memory inputs are kept and fuzzing goes on.
#
#   fuzz/device_run.sh BIN_DIR SECONDS [CORES]
#
# BIN_DIR holds the binaries of fuzz/target/x86_64-unknown-linux-gnu/release/<target> (plain,
# or compressed as <target>.gz / <target>.zst / <target>.xz: unpacked first). Seeds come from
# fuzz/seeds/<target> next to this script, plus fuzz/corpus/<target> and
# fuzz/regressions/<target> when present. Written to $OUT (default ./fuzz_out):
# fuzz_summary.txt (executions, coverage, crashes per target), the crash/timeout/oom inputs as
# <target>-crash-<sha1> etc., logs/<target>.log, and the corpus grown here as corpus.tar.gz
# (unpack into fuzz/ to keep it).
set -uo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0"
    exit 2
fi
BIN_DIR=$(cd "$1" && pwd)
SECONDS_BUDGET=$2
CORES=${3:-$(nproc)}
FUZZ_DIR=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/fuzz_out}
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_work.XXXXXX")

# Share of the cores, out of 16: the slow targets (encoders, Parquet) get more. Mode: fork
# (libFuzzer restarts short jobs, and goes on past crashes) or jobs (workers that run the whole
# time: fast_encoder builds its encoders, seconds, in every new process; a worker that crashes
# stops, the others go on).
TARGETS=(json_row jsonl_reader parquet_reader npy_header tokenizer_json fast_encoder)
WEIGHTS=(2 3 3 1 3 4)
MODES=(fork fork fork fork fork jobs)

mkdir -p "$WORK/bin"
binary_of() {
    local target=$1 packed
    if [ -x "$BIN_DIR/$target" ]; then
        echo "$BIN_DIR/$target"
        return
    fi
    if [ -x "$WORK/bin/$target" ]; then
        echo "$WORK/bin/$target"
        return
    fi
    for packed in "$BIN_DIR/$target".gz "$BIN_DIR/$target".zst "$BIN_DIR/$target".xz; do
        [ -f "$packed" ] || continue
        case $packed in
        *.gz) gzip -dc "$packed" >"$WORK/bin/$target" ;;
        *.zst) zstd -qdc "$packed" >"$WORK/bin/$target" ;;
        *.xz) xz -dc "$packed" >"$WORK/bin/$target" ;;
        esac
        chmod +x "$WORK/bin/$target"
        echo "$WORK/bin/$target"
        return
    done
}

echo "== $(date -u +%FT%TZ) fuzzing ${TARGETS[*]} for ${SECONDS_BUDGET}s on $CORES cores; out: $OUT"
pids=()
ran=()
for i in "${!TARGETS[@]}"; do
    target=${TARGETS[$i]}
    bin=$(binary_of "$target")
    if [ -z "$bin" ]; then
        echo "== $target: no binary in $BIN_DIR, skipped"
        continue
    fi
    jobs=$((CORES * WEIGHTS[i] / 16))
    [ $jobs -lt 1 ] && jobs=1
    inputs=("$WORK/corpus/$target" "$FUZZ_DIR/seeds/$target")
    [ -d "$FUZZ_DIR/corpus/$target" ] && inputs+=("$FUZZ_DIR/corpus/$target")
    [ -d "$FUZZ_DIR/regressions/$target" ] && inputs+=("$FUZZ_DIR/regressions/$target")
    dict=()
    [ -f "$FUZZ_DIR/dicts/$target.dict" ] && dict=("-dict=$FUZZ_DIR/dicts/$target.dict")
    mkdir -p "$WORK/corpus/$target" "$WORK/run/$target"
    if [ "${MODES[$i]}" = jobs ]; then
        mode=(-jobs="$jobs" -workers="$jobs" -print_final_stats=1)
    else
        mode=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    fi
    echo "== $target: $jobs ${MODES[$i]} processes"
    # Each target in its own folder: fork mode keeps its jobs' files under TMPDIR, jobs mode
    # writes its workers' logs (fuzz-<n>.log) to the current folder.
    (cd "$WORK/run/$target" && TMPDIR="$WORK/run/$target" exec "$bin" "${mode[@]}" \
        -max_total_time="$SECONDS_BUDGET" -timeout=60 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
        -artifact_prefix="$OUT/$target-" "${dict[@]}" "${inputs[@]}" \
        >"$OUT/logs/$target.log" 2>&1) &
    pids+=($!)
    ran+=("$target")
done
for pid in "${pids[@]}"; do
    wait "$pid"
done

summary="$OUT/fuzz_summary.txt"
{
    echo "fuzz run $(date -u +%FT%TZ), ${SECONDS_BUDGET}s per target, all targets at once, $CORES cores, $(uname -n)"
    printf '%-15s %5s %12s %8s %7s %8s %7s  %s\n' target procs execs exec/s cov ft corpus "crashes/timeouts/ooms"
    for i in "${!TARGETS[@]}"; do
        target=${TARGETS[$i]}
        case " ${ran[*]} " in *" $target "*) ;; *) continue ;; esac
        log="$OUT/logs/$target.log"
        if [ "${MODES[$i]}" = jobs ]; then
            # Each worker's last status line "#<execs> ... cov: C ft: F corp: N/... exec/s: E";
            # executions and exec/s add up, coverage and corpus are the largest (shared corpus).
            status=""
            for worker in "$WORK/run/$target"/fuzz-*.log; do
                [ -f "$worker" ] || continue
                tail -c 200000 "$worker" >"$OUT/logs/$target-$(basename "$worker")"
                status+=$(grep -E '^#[0-9]+' "$worker" | tail -1)$'\n'
            done
            execs=$(grep -oE '^#[0-9]+' <<<"$status" | tr -d '#' | awk '{s += $1} END {print s}')
            field() {
                if [ "$1" = exec/s ]; then
                    grep -oE "$1:? [0-9]+" <<<"$status" | grep -oE '[0-9]+$' | awk '{s += $1} END {print s}'
                else
                    grep -oE "$1:? [0-9]+" <<<"$status" | grep -oE '[0-9]+$' | sort -n | tail -1
                fi
            }
        else
            # Fork mode's status line: "#<execs>: cov: C ft: F corp: N exec/s: E oom/timeout/crash: ..."
            status=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
            execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$status")
            field() { grep -oE "$1:? [0-9]+" <<<"$status" | grep -oE '[0-9]+$'; }
        fi
        jobs=$((CORES * WEIGHTS[i] / 16))
        [ $jobs -lt 1 ] && jobs=1
        crashes=$(find "$OUT" -maxdepth 1 -name "$target-crash-*" | wc -l)
        timeouts=$(find "$OUT" -maxdepth 1 -name "$target-timeout-*" | wc -l)
        ooms=$(find "$OUT" -maxdepth 1 -name "$target-oom-*" | wc -l)
        printf '%-15s %5s %12s %8s %7s %8s %7s  %s/%s/%s\n' "$target" "$jobs" "${execs:-?}" \
            "$(field exec/s)" "$(field cov)" "$(field ft)" "$(field corp)" "$crashes" "$timeouts" "$ooms"
    done
    echo
    # Each kept input (the first 12) run once more on its own, for its first line of panic or
    # error; a timeout's input is not run again (it would take the whole -timeout).
    shown=0
    for artifact in "$OUT"/*-crash-* "$OUT"/*-oom-* "$OUT"/*-timeout-*; do
        [ -f "$artifact" ] || continue
        shown=$((shown + 1))
        if [ $shown -gt 12 ]; then
            echo "(more kept inputs in $OUT)"
            break
        fi
        case $artifact in *-timeout-*)
            echo "$(basename "$artifact"): ran past -timeout=60"
            continue
            ;;
        esac
        name=$(basename "$artifact")
        target=${name%%-crash-*}
        target=${target%%-oom-*}
        bin=$(binary_of "$target")
        why=$(timeout 60 "$bin" -rss_limit_mb=4096 -malloc_limit_mb=2048 "$artifact" 2>&1 |
            grep -m1 -A1 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' | tr '\n' ' ' || true)
        echo "$name: ${why:-no message}"
    done
} >"$summary"
tar czf "$OUT/corpus.tar.gz" -C "$WORK" corpus
rm -rf "$WORK"
cat "$summary"
