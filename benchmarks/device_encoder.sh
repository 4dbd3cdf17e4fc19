#!/usr/bin/env bash
# The encoder's many-core figures on a lent machine that has neither network nor a Rust
# toolchain (the `device` tool): the in-memory race cells at 1-16 threads and the memory of 1
# and 8 DataLoader workers, with what this checkout built carried along.
#
#   benchmarks/device_encoder.sh CARRY_DIR [THREADS]
#
# CARRY_DIR (made here by `benchmarks/device_encoder.sh --pack CARRY_DIR`) holds:
#   corpus.tar.xz   work/race/corpus (the race's 60 MB main and 10 MB CJK rows, corpus.json)
#   qwen.json.xz    Qwen's tokenizer.json (python -m data_io.tokenizer.vocabularies qwen)
# (xz, unpacked with Python's own modules: the machine may have no zstd.)
#   wheels/         gigatoken, awkward and orjson for the machine's Python (3.12)
# The extension (data_io/_core.abi3.so) is carried as it is built here (abi3: any Python >=
# 3.11). Writes race.md, race.json, memory.md and the logs to $OUT (default ./device_out);
# with PREPARE=1, prepare.md (benchmarks/prepare.py) instead.
set -uo pipefail

if [ "${1:-}" = "--pack" ]; then
    dir=${2:?carry folder}
    mkdir -p "$dir/wheels"
    tar -C work/race -cf - corpus/main/rows corpus/main/corpus.json corpus/cjk/rows \
        corpus/cjk/corpus.json | xz -T0 -6 >"$dir/corpus.tar.xz"
    xz -T0 -6 -c "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" >"$dir/qwen.json.xz"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$dir/wheels" gigatoken==0.10.0 awkward==2.14.0 orjson \
        awkward-cpp==57
    du -sh "$dir"
    exit 0
fi

CARRY=$(cd "${1:?carry folder}" && pwd)
THREADS=${2:-1,2,4,8,16}
OUT=${OUT:-$PWD/device_out}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/device_encoder.XXXXXX")
export PYTHONUNBUFFERED=1

# NO_WHEELS=1: the Python on the PATH has gigatoken already (a trial run of this script here).
if [ -z "${NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" \
        "$CARRY"/wheels/*.whl || exit 1
fi
export PYTHONPATH="$WORK/site:$PWD"
mkdir -p "$HOME/.cache/data_io/vocab/qwen" "$WORK/race"
python3 - "$CARRY" "$WORK/race" "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" <<'PY' || exit 1
import lzma, shutil, sys, tarfile
carry, race, tokenizer = sys.argv[1:]
with lzma.open(f"{carry}/qwen.json.xz") as packed, open(tokenizer, "wb") as out:
    shutil.copyfileobj(packed, out)
with tarfile.open(f"{carry}/corpus.tar.xz") as corpus:
    corpus.extractall(race, filter="data")
PY
{
    nproc
    python3 --version
    python3 -c "import data_io._core, gigatoken, tokenizers; print(tokenizers.__version__)"
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled
} >"$OUT/machine.txt" 2>&1

# PREPARE=1: prepare's figures instead (benchmarks/prepare.py on the main slice's responses,
# Qwen's vocabulary, no datatrove: it is not installed there).
if [ -n "${PREPARE:-}" ]; then
    python3 -m benchmarks.prepare --corpus "$WORK/race/corpus/main/rows" --text-field response \
        --tokenizers qwen --threads "$THREADS" --no-datatrove --dedup-modes doc,near \
        --workdir "$WORK/prepare" >"$OUT/prepare.md" 2>"$OUT/prepare.log"
    tail -n 30 "$OUT/prepare.md" "$OUT/prepare.log"
    exit 0
fi

# The oracle (tokenizers) runs once per slice, at the first thread count, for the ids.
python3 -m benchmarks.tokenize --race --mb 60 --cjk-mb 10 --threads "$THREADS" \
    --vocab "$HOME/.cache/data_io/vocab/qwen/tokenizer.json" \
    --engines "${ENGINES:-data_io-batch,data_io-arrow,gigatoken-batch,data_io}" \
    --workdir "$WORK/race" >"$OUT/race.md" 2>"$OUT/race.log"
cp "$WORK/race/race.json" "$OUT/" 2>/dev/null

# MEMORY=0: the race alone.
if [ "${MEMORY:-1}" != 0 ]; then
    python3 -m benchmarks.encoder_memory --docs "$WORK/race/corpus/main/rows" --mb 20 \
        --workers 1 8 >"$OUT/memory.md" 2>"$OUT/memory.log"
fi
tail -n 40 "$OUT/race.md" "$OUT/memory.md" 2>/dev/null
