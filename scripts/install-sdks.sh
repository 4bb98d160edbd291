#!/usr/bin/env bash
# Installs the official RocketMQ 5 SDKs that tests/v2/sdk runs against the gateway, each in a folder of its own:
#   DEST/rmq5-python  a virtual environment with PyPI rocketmq-python-client (made by the project's uv)
#   DEST/rmq5-node    an npm prefix with rocketmq-client-nodejs
# The Python SDK never goes into the workspace .venv: its generated stubs register the same protobuf symbols
# (apache.rocketmq.v2.*) as the project's, and one process cannot hold both.
# Idempotent: a folder whose SDK answers the pinned version is left alone; anything else is rebuilt.
#
# Usage: scripts/install-sdks.sh DEST PYTHON_SDK_VERSION NODE_SDK_VERSION   (UV names uv; PYTHON the interpreter)
set -euo pipefail
dest=$1
python_version=$2
node_version=$3
uv=${UV:?UV must name the uv binary}
python=${PYTHON:-python3}

venv="$dest/rmq5-python"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; \
sys.exit(m.version('rocketmq-python-client') != '$python_version')" >/dev/null 2>&1; then
  echo "installing rocketmq-python-client==$python_version into $venv"
  rm -rf "$venv"
  "$uv" venv --quiet --python "$(command -v "$python")" "$venv"
  "$uv" pip install --quiet --python "$venv/bin/python" "rocketmq-python-client==$python_version"
fi

prefix="$dest/rmq5-node"
package="$prefix/node_modules/rocketmq-client-nodejs/package.json"
if ! [ "$(node -p "require('$(realpath -m "$package")').version" 2>/dev/null)" = "$node_version" ]; then
  echo "installing rocketmq-client-nodejs@$node_version into $prefix"
  rm -rf "$prefix"
  mkdir -p "$prefix"
  npm install --loglevel=error --no-audit --no-fund --prefix "$prefix" "rocketmq-client-nodejs@$node_version"
fi
