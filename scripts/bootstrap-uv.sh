#!/usr/bin/env bash
# Installs uv into a project-local virtual environment (.tools/uv by default) and prints nothing on success.
#
# A fresh machine has no uv, and Debian's /usr/bin/python3 is "externally managed" (PEP 668): `pip install --user`
# is refused. A virtual environment of its own is always allowed, so uv goes there, never into the system Python
# and never into ~/.local. The environment is built in a temporary folder and moved into place only when uv
# answers `--version`, so a failed bootstrap leaves nothing half-made behind.
#
# Usage: scripts/bootstrap-uv.sh DEST UV_VERSION   (PYTHON names the interpreter; default python3)
set -euo pipefail
dest=$1
version=$2
python=${PYTHON:-python3}

if [ -x "$dest/bin/uv" ] && "$dest/bin/uv" --version 2>/dev/null | grep -qF "uv $version"; then
  exit 0
fi
command -v "$python" >/dev/null 2>&1 || { echo "bootstrap-uv: no $python on PATH (Python 3.11 or 3.12 is needed)" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "bootstrap-uv: $python is $("$python" -V 2>&1); Python 3.11 or newer is needed" >&2; exit 1; }

tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$dest")"
if ! "$python" -m venv "$tmp" >/dev/null 2>&1; then
  # Debian and Ubuntu ship venv's pip bootstrap (ensurepip) in a separate package.
  rm -rf "$tmp"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap-uv: installing python3-venv (Debian package) for $python"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$python" -m venv "$tmp"
  else
    echo "bootstrap-uv: '$python -m venv' failed; install your distribution's venv package (Debian: python3-venv)" >&2
    exit 1
  fi
fi
echo "bootstrap-uv: installing uv $version into $dest"
"$tmp/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$version"
# uv is a native binary (no shebang naming the temporary path), so the environment can be moved into place.
"$tmp/bin/uv" --version >/dev/null
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
