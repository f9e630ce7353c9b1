#!/usr/bin/env bash
# CUDA checks of the compiled transformers: exactness up to 2^20 (> 10^6) tokens and throughput.
#
#   benchmarks/gpu.sh [OUT_DIR]        (default: benchmarks/gpu-results)
#   BUDGET=25 benchmarks/gpu.sh        (find-limit seconds per program and dtype; default 25)
#
# Needs one CUDA GPU. Steps (about 10 minutes with the default budget on an H100/H200-class GPU):
#   1. the CUDA tests (sdpa/scan on the GPU equal the CPU model; 2^18 tokens exact in float32/bfloat16);
#   2. `rasp verify --find-limit` on CUDA for Dyck-1 and the seed tasks (UR, UL, NRFirst, NLFirst with the
#      task samplers; UF/UB, whose inputs are at most |alphabet|+1 tokens, with uniform inputs over 16
#      symbols), bfloat16 and float32, doubling from 1,024 up to 1,048,576 tokens (default backend: fused
#      SDPA for the uniform heads);
#   3. the same with the O(n) scan backend on the GPU up to 2^24 tokens for Dyck-1;
#   4. forward throughput (tokens/s) and peak GPU memory at 4,096 / 65,536 / 1,048,576 tokens.
# Every result is written as JSON (and the tables as markdown) to OUT_DIR; gpu.txt has the GPU and date.
#
# On the lent GPU machine (its image lacks lark and this package; see benchmarks/device_env.sh): first,
# here, `bash benchmarks/device_wheels.sh`; then the device tool's run with carry [".whl"] and the
# command `benchmarks/gpu.sh $OUT/gpu` (only what is written under $OUT comes back).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh  # lark from .whl/ and `rasp` where the package is not installed
OUT=${1:-benchmarks/gpu-results}
BUDGET=${BUDGET:-25}
mkdir -p "$OUT"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU: nothing to do')" || exit 2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; date -u +%Y-%m-%d;
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } | tee "$OUT/gpu.txt"

echo "== 1. CUDA tests"
python3 -m pytest -q -p no:cacheprovider tests/test_compiler_io.py -k cuda 2>&1 | tee "$OUT/pytest_cuda.txt"

echo "== 2. find-limit on CUDA (default backend), up to 1,048,576 tokens"
verify() {  # name, extra args...
  local name=$1; shift
  rasp verify "$@" --device cuda --dtype bfloat16,float32 --lengths 1024 --samples 1 --max-new 16 \
    --find-limit --start 1024 --max-length 1048576 --budget "$BUDGET" --json > "$OUT/verify_$name.json"
  python3 - "$OUT/verify_$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for l in d["limits"]:
    print(f"{sys.argv[2]:10s} {l['dtype']:9s} longest exact {l['longest_exact']}  ({l['stopped']}, {l['seconds']} s)")
PY
}
verify dyck1 programs/dyck1.cr
for t in ur ul nrfirst nlfirst; do verify "$t" "programs/$t.rasp"; done
for t in uf ub; do verify "$t" "programs/$t.rasp" --alphabet 16 --inputs uniform; done

echo "== 3. scan backend on CUDA, Dyck-1 up to 2^24 tokens"
rasp verify programs/dyck1.cr --device cuda --backend scan --dtype bfloat16,float32 --lengths 1024 --samples 1 \
  --find-limit --start 65536 --max-length 16777216 --budget "$BUDGET" --json > "$OUT/verify_dyck1_scan.json"
python3 -c "import json; [print('dyck1 scan', l['dtype'], l['longest_exact'], l['stopped']) for l in json.load(open('$OUT/verify_dyck1_scan.json'))['limits']]"

echo "== 4. throughput on CUDA"
python3 benchmarks/compiled.py --device cuda --programs dyck1 bin_majority majority ur ul nrfirst nlfirst uf ub \
  --dtypes bfloat16 --sizes 4096,65536,1048576 --budget 10 --max-length 1048576 --start 65536 \
  --json-out "$OUT/compiled_cuda.json" | tee "$OUT/compiled_cuda.md"
echo "results in $OUT"
