#!/usr/bin/env bash
# Generates the Python stubs (and typed .pyi) for proto/ into libs/mq-common/src/mq/.
# The generated tree is committed; CI regenerates it and fails on any difference.
# It is generated into a temporary folder and swapped in only when protoc succeeded, so a failed run leaves the
# checkout as it was. UV names the uv to run protoc with (the Makefile sets it; default: uv on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-uv}
out=libs/mq-common/src
staging=$(mktemp -d "${TMPDIR:-/tmp}/mq-proto.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mapfile -t files < <(cd proto && find mq -name '*.proto' | sort)
(cd proto && "$uv" run --frozen python -m grpc_tools.protoc -I. \
  --python_out="$staging" --grpc_python_out="$staging" \
  --mypy_out="$staging" --mypy_grpc_out="$staging" "${files[@]}")
find "$staging/mq" -type d -exec touch {}/__init__.py \;
touch "$staging/mq/py.typed"
old="$out/mq.old.$$"
if [ -d "$out/mq" ]; then mv "$out/mq" "$old"; fi
mv "$staging/mq" "$out/mq"
rm -rf "$old"
