#!/usr/bin/env bash
# Download, here, the wheels the lent GPU machine lacks (see benchmarks/device_env.sh): lark, for the
# device's Python 3.12. Writes .whl/ in the repository root (ignored by git; carry it to the device).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(python3 -c "import importlib.metadata as m; print(m.version('lark'))")
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl "lark==$version"
ls -l .whl
