#!/usr/bin/env bash
# Generates the Python stubs (and typed .pyi) for proto/ into libs/mq-common/src/mq/.
# The generated tree is committed; CI regenerates it and fails on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."
out=libs/mq-common/src
rm -rf "$out/mq"
mapfile -t files < <(cd proto && find mq -name '*.proto' | sort)
(cd proto && uv run --frozen python -m grpc_tools.protoc -I. \
  --python_out="../$out" --grpc_python_out="../$out" \
  --mypy_out="../$out" --mypy_grpc_out="../$out" "${files[@]}")
find "$out/mq" -type d -exec touch {}/__init__.py \;
touch "$out/mq/py.typed"
