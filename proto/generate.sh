#!/usr/bin/env bash
# Generates the Python stubs (and typed .pyi) for proto/ into libs/mq-common/src/mq/ (this project's contract) and
# libs/mq-common/src/apache/ (the vendored apache/rocketmq-apis v2 protos, see proto/apache/rocketmq/UPSTREAM).
# The generated tree is committed; CI regenerates it and fails on any difference.
# It is generated into a temporary folder and swapped in only when protoc succeeded, so a failed run leaves the
# checkout as it was. UV names the uv to run protoc with (the Makefile sets it; default: uv on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-uv}
out=libs/mq-common/src
staging=$(mktemp -d "${TMPDIR:-/tmp}/mq-proto.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mapfile -t files < <(cd proto && find mq apache -name '*.proto' | sort)
(cd proto && "$uv" run --frozen python -m grpc_tools.protoc -I. \
  --python_out="$staging" --grpc_python_out="$staging" \
  --mypy_out="$staging" --mypy_grpc_out="$staging" "${files[@]}")
for pkg in mq apache; do
  find "$staging/$pkg" -type d -exec touch {}/__init__.py \;
  touch "$staging/$pkg/py.typed"
  old="$out/$pkg.old.$$"
  if [ -d "$out/$pkg" ]; then mv "$out/$pkg" "$old"; fi
  mv "$staging/$pkg" "$out/$pkg"
  rm -rf "$old"
done
