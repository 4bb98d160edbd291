#!/usr/bin/env bash
# Build both images offline: base images (debootstrap, cached), wheels (host), `docker build --network none`.
#
#   docker/build-images.sh [TAG]     (default: the chart's image tag, 0.1.0)
#
# Produces pyrocketmq:TAG (services) and pyrocketmq-spark:TAG (the publish job). Base images are made once
# (pyrocketmq-base-etcd:bookworm with etcd-server, pyrocketmq-base-jre:bookworm); FORCE=1 remakes them. Prints one timing line per
# step and a last JSON line with the seconds of each. Dangling images of earlier builds (label
# io.pyrocketmq.image) are removed. Needs a running Docker daemon (docker/dockerd.sh start).
set -euo pipefail
cd "$(dirname "$0")/.."

TAG="${1:-0.1.0}"
WHEELS=.build/wheels
BASE=pyrocketmq-base-etcd:bookworm  # with Debian's etcd-server: the chart runs etcd from the services image
BASE_JRE=pyrocketmq-base-jre:bookworm
declare -A SECONDS_OF

step() {  # step NAME CMD...
  local name="$1" t0
  shift
  t0=$(date +%s.%N)
  "$@"
  SECONDS_OF[$name]=$(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 1))")
  echo "build-images: $name ${SECONDS_OF[$name]} s" >&2
}

build() {  # build DOCKERFILE IMAGE BASE CONTEXT
  DOCKER_BUILDKIT=0 docker build --quiet --network none -f "$1" -t "$2" --build-arg BASE_IMAGE="$3" "$4" \
    2> >(grep -Ev 'DEPRECATED|BuildKit|environment-variable|^\s*$' >&2) >/dev/null
}

step base bash docker/base-image.sh "$BASE" etcd-server
step base_jre bash docker/base-image.sh "$BASE_JRE" openjdk-17-jre-headless
step wheels bash docker/wheels.sh "$WHEELS"
cp docker/spark-job/publish_flights.py docker/spark-job/spark-entrypoint.sh "$WHEELS/spark/"
step image bash -c "$(declare -f build); build docker/Dockerfile pyrocketmq:$TAG $BASE $WHEELS/services"
step image_spark bash -c "$(declare -f build); build docker/Dockerfile.spark pyrocketmq-spark:$TAG $BASE_JRE $WHEELS/spark"
# The builder leaves each install stage untagged, and a rebuild untags the previous image: drop those (only
# dangling images carrying this project's label), or every build keeps about 3 GB.
docker image prune --force --filter label=io.pyrocketmq.image >/dev/null
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^pyrocketmq(-spark)?:$TAG " >&2
printf '{"base": %s, "base_jre": %s, "wheels": %s, "image": %s, "image_spark": %s}\n' \
  "${SECONDS_OF[base]}" "${SECONDS_OF[base_jre]}" "${SECONDS_OF[wheels]}" "${SECONDS_OF[image]}" \
  "${SECONDS_OF[image_spark]}"
