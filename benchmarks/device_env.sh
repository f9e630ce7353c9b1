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
fi
