#!/usr/bin/env bash
# The encoder's and prepare's many-core figures on a lent machine that has neither network nor
# a Rust toolchain (the `device` tool), with what this checkout built carried along:
#
#   benchmarks/device_encoder.sh CARRY_DIR [THREADS]
#   benchmarks/device_encoder.sh --pack CARRY_DIR [CORPUS]     (here, before the call)
#
# STEPS (default race,memory) picks and orders the runs, each packed into $OUT/results.tar (default
# ./device_out) as it ends, so that a call cut off at its limit still brings back the steps done:
#   prepare  benchmarks/prepare.py on the main slice's `response` field, Qwen, no datatrove
#            (not installed there); PREPARE_MODES (default none,doc,line,near) its dedup rows
#   race     the race's in-memory and file cells (benchmarks/tokenize.py --race), ids checked;
#            ENGINES overrides its engines
#   memory   the encoder's RSS in 1 and 8 DataLoader workers (benchmarks/encoder_memory.py)
#   phases   where prepare's time goes (benchmarks/prepare_phases.py, dedup none, doc and
#            near, the null encoder too), beside the build in CARRY_DIR/baseline.tar if any;
#            PHASES_DEDUP, PHASES_ARGS (e.g. --batch-mb 32) change it
#   scaling  benchmarks/encoder_scaling.py at the largest thread count, on the main slice's
#            responses: one process of N threads beside N processes of one thread (the machine's
#            own ceiling: shared caches, memory bandwidth, hyper-threads), warm; Arrow too;
#            SCALING_BATCHES (default 4096) the texts a call, SCALING_FORMS list or arrow alone
#   gzscale  benchmarks/prepare_scaled.py on the main slice's rows as one gzip -6 member, cut at
#            entry points into 1, 4 and 16 ranges, the units on as many workers as the largest
#            thread count: the slowest unit and the wall clock of a gzip stream's scale-out
#   gpu      benchmarks/loader_gpu_step.py at batch_max_length 4096 and 16384: one training
#            step of a tiny model from SampledDataset batches on the GPU, host→device speed
#   big      benchmarks/prepare.py (none, doc) on BIG_COPIES (default 14) copies of the main
#            slice's rows, each copy's responses marked with its number (no copy is an exact
#            duplicate of another): the >= 2 GB corpus, at the largest thread count
#
# CARRY_DIR holds (made by --pack from CORPUS, default work/race/corpus):
#   corpus.tar.xz   the race corpus's main and CJK rows with their corpus.json (its size is the
#                   race's --mb / --cjk-mb there)
#   qwen.json.xz    Qwen's tokenizer.json (python -m data_io.tokenizer.vocabularies qwen)
#   _core.abi3.so   this checkout's extension, stripped (abi3: any Python >= 3.11)
#   baseline.tar    (optional, for phases) another build's data_io folder, with its extension
#                   unless its Rust is this checkout's
#   wheels/         gigatoken, awkward and orjson for the machine's Python (3.12)
# (xz, unpacked with Python's own modules: the machine may have no zstd.)
set -uo pipefail

if [ "${1:-}" = "--pack" ]; then
    dir=${2:?carry folder}
    corpus=${3:-work/race/corpus}
    mkdir -p "$dir/wheels"
    tar -C "$corpus" -cf - main/rows main/corpus.json cjk/rows cjk/corpus.json |
        xz -T0 -6 >"$dir/corpus.tar.xz"
    xz -T0 -6 -c "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" >"$dir/qwen.json.xz"
    strip -o "$dir/_core.abi3.so" data_io/_core.abi3.so
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$dir/wheels" gigatoken==0.10.0 awkward==2.14.0 orjson \
        awkward-cpp==57
    du -sh "$dir"
    exit 0
fi

CARRY=$(cd "${1:?carry folder}" && pwd)
THREADS=${2:-1,2,4,8,16}
STEPS=${STEPS:-race,memory}
SCALING_BATCHES=${SCALING_BATCHES:-4096}
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/device_encoder.XXXXXX")}
# Each step's files go to RES; $OUT gets two files only (the device tool brings back at most
# eight): results.tar with every step's files, remade after each step, and summary.md.
RES="$WORK/results"
mkdir -p "$RES"
pack() {
    tar -C "$RES" -cf "$OUT/results.tar.part" . && mv "$OUT/results.tar.part" "$OUT/results.tar"
}
export PYTHONUNBUFFERED=1 OPENBLAS_NUM_THREADS=1

# NO_WHEELS=1: the Python on the PATH has gigatoken already (a trial run of this script here).
if [ -z "${NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" \
        "$CARRY"/wheels/*.whl || exit 1
fi
if [ -f "$CARRY/_core.abi3.so" ]; then
    cp "$CARRY/_core.abi3.so" data_io/_core.abi3.so || exit 1
fi
export PYTHONPATH="$WORK/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$HOME/.cache/data_io/vocab/qwen" "$WORK/race/corpus"
python3 - "$CARRY" "$WORK/race/corpus" "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" <<'PY' || exit 1
import lzma, shutil, sys, tarfile
carry, corpus, tokenizer = sys.argv[1:]
with lzma.open(f"{carry}/qwen.json.xz") as packed, open(tokenizer, "wb") as out:
    shutil.copyfileobj(packed, out)
with tarfile.open(f"{carry}/corpus.tar.xz") as packed:
    packed.extractall(corpus, filter="data")
PY
megabytes() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['megabytes'])" "$1"; }
MB=$(megabytes "$WORK/race/corpus/main/corpus.json")
CJK_MB=$(megabytes "$WORK/race/corpus/cjk/corpus.json")
{
    nproc
    python3 --version
    python3 -c "import data_io._core, gigatoken, tokenizers; print(tokenizers.__version__)"
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled
    lscpu
    echo "corpus: main $MB MB, cjk $CJK_MB MB; steps $STEPS; threads $THREADS"
} >"$RES/machine.txt" 2>&1

LARGEST=${THREADS##*,}
[ "${THREADS%%,*}" -gt "$LARGEST" ] && LARGEST=${THREADS%%,*}

for step in ${STEPS//,/ }; do
    echo "== $step $(date +%T)" | tee -a "$OUT/summary.md"
    case $step in
    prepare)
        python3 -m benchmarks.prepare --corpus "$WORK/race/corpus/main/rows" \
            --text-field response --tokenizers qwen --threads "$THREADS" --no-datatrove \
            --dedup-modes "${PREPARE_MODES:-none,doc,line,near}" --workdir "$WORK/prepare" \
            >"$RES/prepare.md" 2>"$RES/prepare.log"
        tail -n 20 "$RES/prepare.md" "$RES/prepare.log" ;;
    race)
        # The oracle (tokenizers) runs once per slice, at the first thread count, for the ids.
        python3 -m benchmarks.tokenize --race --mb "$MB" --cjk-mb "$CJK_MB" --threads "$THREADS" \
            --vocab "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" \
            --engines "${ENGINES:-data_io-batch,data_io-arrow,gigatoken-batch,data_io}" \
            --workdir "$WORK/race" >"$RES/race.md" 2>"$RES/race.log"
        cp "$WORK/race/race.json" "$RES/" 2>/dev/null
        tail -n 40 "$RES/race.md" "$RES/race.log" ;;
    memory)
        python3 -m benchmarks.encoder_memory --docs "$WORK/race/corpus/main/rows" --mb 20 \
            --workers 1 8 >"$RES/memory.md" 2>"$RES/memory.log"
        tail -n 20 "$RES/memory.md" ;;
    phases)
        baseline=()
        if [ -f "$CARRY/baseline.tar" ]; then
            mkdir -p "$WORK/baseline" && tar -C "$WORK/baseline" -xf "$CARRY/baseline.tar"
            # Without an extension of its own: the same Rust as this checkout's.
            [ -f "$WORK/baseline/data_io/_core.abi3.so" ] ||
                cp data_io/_core.abi3.so "$WORK/baseline/data_io/"
            baseline=(--baseline "$WORK/baseline")
        fi
        python3 -m benchmarks.prepare_phases --corpus "$WORK/race/corpus/main/rows" \
            --threads "$THREADS" --floor --rounds "${ROUNDS:-2}" \
            --tokenizer "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" "${baseline[@]}" \
            --dedup "${PHASES_DEDUP:-none,doc,near}" ${PHASES_ARGS:-} \
            >"$RES/phases.md" 2>"$RES/phases.log"
        cat "$RES/phases.md" ;;
    scaling)
        for texts in ${SCALING_BATCHES//,/ }; do
            for form in "" --arrow; do
                [ -z "$form" ] && [ "${SCALING_FORMS:-both}" = arrow ] && continue
                [ -n "$form" ] && [ "${SCALING_FORMS:-both}" = list ] && continue
                echo "texts a call: $texts ${form:-list[str]}"
                python3 -m benchmarks.encoder_scaling --docs "$WORK/race/corpus/main/rows" \
                    --field response --threads "$LARGEST" --rounds "${ROUNDS:-2}" --seconds 3 \
                    --batch "$texts" $form --tokenizer "$HOME/.cache/data_io/vocab/qwen/tokenizer.json"
            done
        done >"$RES/scaling.md" 2>"$RES/scaling.log"
        cat "$RES/scaling.md" ;;
    big)
        python3 - "$WORK/race/corpus/main/rows" "$WORK/big" "${BIG_COPIES:-14}" <<'PY' || exit 1
import sys
from pathlib import Path
rows, big, copies = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
big.mkdir(parents=True, exist_ok=True)
for path in sorted(rows.glob("*.jsonl")):
    data = path.read_bytes()
    with open(big / path.name, "wb") as out:
        for copy in range(copies):
            out.write(data.replace(b'"response": "', b'"response": "%d ' % copy))
print(sum(p.stat().st_size for p in big.iterdir()) / 1e9, "GB")
PY
        python3 -m benchmarks.prepare --corpus "$WORK/big" --text-field response \
            --tokenizers qwen --threads "$LARGEST" --no-datatrove --dedup-modes none,doc \
            --workdir "$WORK/prepare_big" >"$RES/big.md" 2>"$RES/big.log"
        tail -n 12 "$RES/big.md" "$RES/big.log" ;;
    gzscale)
        python3 - "$WORK/race/corpus/main/rows" "$WORK/gzscale" <<'PY' || exit 1
import gzip
import sys
from pathlib import Path
rows, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
data = b"".join(path.read_bytes() for path in sorted(rows.glob("*.jsonl")))
(out / "rows.jsonl").write_bytes(data)
(out / "rows.jsonl.gz").write_bytes(gzip.compress(data, 6))
PY
        python3 -m benchmarks.prepare_scaled --corpus "$WORK/gzscale" --formats gz \
            --ranges 1,4,16 --workers "$LARGEST" --rounds "${ROUNDS:-1}" --text-field response \
            --workdir "$WORK/bench_gzscale" >"$RES/gzscale.md" 2>"$RES/gzscale.log"
        cat "$RES/gzscale.md" ;;
    gpu)
        for bml in 4096 16384; do
            python3 -m benchmarks.loader_gpu_step --batch-max-length "$bml" --batches 200
        done >"$RES/gpu.md" 2>"$RES/gpu.log"
        cat "$RES/gpu.md" ;;
    *) echo "unknown step $step" ;;
    esac 2>&1 | tee -a "$OUT/summary.md"
    # The step ran in the pipeline's subshell: its `exit 1` ends only that.
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "step $step failed"; failed=1; }
    pack
done
echo "== done $(date +%T)"
exit "${failed:-0}"
