# Sourced by benchmarks/gpu.sh and benchmarks/gpu_learn.sh: makes this checkout runnable on a machine
# where the package is not installed (the lent GPU machine: its image has PyTorch, numpy, safetensors,
# hypothesis, pytest, rich, tqdm and matplotlib, but not lark, and nothing can be fetched there).
#
#   here:  bash benchmarks/device_wheels.sh      (downloads lark's wheel into .whl/, ignored by git)
#   there: run the script with .whl carried; this file installs the wheels into /tmp/site
#
# Afterwards `rasp` is the CLI (the installed script, or `python3 -m rasp` from this checkout) and the
# checkout is on PYTHONPATH (for the benchmark scripts and the worker processes of `rasp learn --jobs`).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import lark" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      || { echo "could not install the wheels in .whl/"; exit 2; }
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
  else
    echo "lark is not installed and there is no .whl/: run 'bash benchmarks/device_wheels.sh' first, and carry .whl"
    exit 2
  fi
fi
python3 -c "import lark, numpy, torch, safetensors" || { echo "a required package is missing"; exit 2; }
if ! command -v rasp >/dev/null 2>&1 || ! rasp --version >/dev/null 2>&1; then
  rasp() { python3 -m rasp "$@"; }
  RASP=(python3 -m rasp)  # a command (not a function) for `timeout`
else
  RASP=(rasp)
fi

# use_out_dir DIR: sets OUT, where a script writes its results. With PACK=1 (on the lent machine, from
# which at most 8 files come back), OUT is a scratch folder and, however the script ends, DIR receives
# two files: results.tar.gz (everything) and summary.txt. Without PACK, OUT is DIR itself.
use_out_dir() {
  mkdir -p "$1" || exit 2
  PACK_FINAL=$(cd "$1" && pwd)
  if [ -n "${PACK:-}" ]; then
    OUT=$(mktemp -d)
    trap 'pack_out_dir' EXIT
  else
    OUT=$PACK_FINAL
  fi
}
pack_out_dir() {
  tar -czf "$PACK_FINAL/results.tar.gz" -C "$OUT" . && echo "packed $OUT into $PACK_FINAL/results.tar.gz"
  cp "$OUT/summary.txt" "$PACK_FINAL/summary.txt" 2>/dev/null
  true
}
# step NAME SECONDS COMMAND...: runs one command (not a shell function: "${RASP[@]}" for the CLI) under a
# time limit; its exit status goes to $OUT/summary.txt and into STATUS (the largest), the script's own.
# Every limit is also cut to what is left of DEADLINE seconds (default 560) from when this file was
# sourced, so the steps together stay inside a 10-minute device call and the packing still runs.
STATUS=0
DEADLINE_AT=$(( $(date +%s) + ${DEADLINE:-560} ))
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( DEADLINE_AT - $(date +%s) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 0 ]; then
    echo "$name: not run (DEADLINE reached), exit 124" >> "$OUT/summary.txt"
    STATUS=124
    return 0
  fi
  echo "== $name" >&2  # (stderr: a step's stdout may be redirected to its JSON file)
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  [ "$rc" -eq 124 ] && echo "   ($name: stopped at its limit of $limit s)" >&2
  echo "$name: exit $rc" >> "$OUT/summary.txt"
  [ "$rc" -gt "$STATUS" ] && STATUS=$rc
  return 0
}
