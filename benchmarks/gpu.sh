#!/usr/bin/env bash
# CUDA checks of the compiled transformers: exactness up to 2^20 (> 10^6) tokens and throughput.
#
#   benchmarks/gpu.sh [OUT_DIR]        (default: benchmarks/gpu-results; a relative OUT_DIR is read
#                                       from the current directory)
#   BUDGET=10 benchmarks/gpu.sh        (find-limit seconds per program and dtype; default 10)
#   PACK=1 benchmarks/gpu.sh DIR       (DIR gets results.tar.gz and summary.txt only: the lent machine
#                                       returns at most 8 files)
#
# Needs one CUDA GPU. Steps (about 6 minutes with the default budget, estimated from the budgets, not yet run on a GPU; each step has a time limit, so a
# slow one cannot use up a 10-minute device call, and every result is written as soon as it exists):
#   1. the CUDA tests (sdpa/scan on the GPU equal the CPU model; 2^18 tokens exact in float32/bfloat16);
#   2. `rasp verify --find-limit` on CUDA for Dyck-1 and the seed tasks (UR, UL, NRFirst, NLFirst with the
#      task samplers; UF/UB, whose inputs are at most |alphabet|+1 tokens, with uniform inputs over 16
#      symbols), bfloat16 and float32, doubling from 1,024 up to 1,048,576 tokens (default backend: fused
#      SDPA for the uniform heads);
#   3. the same with the O(n) scan backend on the GPU up to 2^24 tokens for Dyck-1;
#   4. forward throughput (tokens/s) and peak GPU memory at 4,096 / 65,536 / 1,048,576 tokens.
# Every result is written as JSON (and the tables as markdown) to OUT_DIR; gpu.txt has the GPU and date,
# summary.txt each step's exit status and the longest exact lengths. The script's exit status is the
# largest of its steps' (a verification that disagrees exits 1; a step stopped at its limit 124).
#
# On the lent GPU machine (its image lacks lark and this package; see benchmarks/device_env.sh): first,
# here, `bash benchmarks/device_wheels.sh`; then the device tool's run with carry [".whl"] and the
# command `PACK=1 benchmarks/gpu.sh $OUT/gpu` (only what is written under $OUT comes back).
set -uo pipefail
case "${1:-}" in "" | /*) ;; *) set -- "$PWD/$1" ;; esac  # relative to where it was called from
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh  # lark from .whl/ and `rasp` where the package is not installed
BUDGET=${BUDGET:-10}
use_out_dir "${1:-benchmarks/gpu-results}"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU: nothing to do')" || exit 2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; date -u +%Y-%m-%dT%H:%M:%SZ;
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } | tee "$OUT/gpu.txt"

step "1. CUDA tests" 150 python3 -m pytest -q -p no:cacheprovider tests/test_compiler_io.py -k cuda \
  > "$OUT/pytest_cuda.txt"
tail -n 3 "$OUT/pytest_cuda.txt"

limits() {  # FILE NAME: one line per dtype, to the terminal and summary.txt
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(print(f"{sys.argv[2]:10s} no result ({exc})"))
for l in d.get("limits", []):
    print(f"{sys.argv[2]:10s} {l['dtype']:9s} longest exact {l['longest_exact']}  ({l['stopped']}, {l['seconds']} s)")
PY
}
verify() {  # NAME ARGS...: find-limit on CUDA, bfloat16 and float32
  local name=$1; shift
  step "2. find-limit $name" $(( 2 * BUDGET + 90 )) "${RASP[@]}" verify "$@" --device cuda --dtype bfloat16,float32 \
    --lengths 1024 --samples 1 --max-new 16 --find-limit --start 1024 --max-length 1048576 --budget "$BUDGET" \
    --json > "$OUT/verify_$name.json"
  limits "$OUT/verify_$name.json" "$name"
}
verify dyck1 programs/dyck1.cr
for t in ur ul nrfirst nlfirst; do verify "$t" "programs/$t.rasp"; done
for t in uf ub; do verify "$t" "programs/$t.rasp" --alphabet 16 --inputs uniform; done

step "3. scan backend, Dyck-1 up to 2^24" $(( 2 * BUDGET + 90 )) "${RASP[@]}" verify programs/dyck1.cr \
  --device cuda --backend scan --dtype bfloat16,float32 --lengths 1024 --samples 1 --find-limit --start 65536 \
  --max-length 16777216 --budget "$BUDGET" --json > "$OUT/verify_dyck1_scan.json"
limits "$OUT/verify_dyck1_scan.json" "dyck1 scan"

step "4. throughput on CUDA" 240 python3 benchmarks/compiled.py --device cuda \
  --programs dyck1 bin_majority majority ur ul nrfirst nlfirst uf ub --dtypes bfloat16 \
  --sizes 4096,65536,1048576 --budget 5 --max-length 1048576 --start 65536 --json-out "$OUT/compiled_cuda.json"
python3 -c "import json, sys; sys.path.insert(0, 'benchmarks'); import compiled as c; d = json.load(open(sys.argv[1])); \
print(c.table(d['results'], ['bfloat16'], ['4096', '65536', '1048576']))" "$OUT/compiled_cuda.json" \
  > "$OUT/compiled_cuda.md" 2>/dev/null && cat "$OUT/compiled_cuda.md"
echo "results in ${PACK_FINAL} (exit $STATUS)"
exit "$STATUS"
