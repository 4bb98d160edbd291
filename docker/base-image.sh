#!/usr/bin/env bash
# Build a Debian bookworm base image without a registry: debootstrap a minimal rootfs and `docker import` it.
#
#   docker/base-image.sh [IMAGE] [EXTRA_PACKAGES]
#     IMAGE            default pyrocketmq-base:bookworm
#     EXTRA_PACKAGES   comma-separated extra Debian packages (e.g. openjdk-17-jre-headless for the Spark base)
#
# Skips the work when IMAGE already exists (FORCE=1 rebuilds). The Debian mirror is read at run time from the
# host's apt sources (/etc/apt/sources.list.d/*.sources or *.list, or MIRROR=...); it is never written to a file
# and the image's own apt sources are left empty (the image cannot reach a mirror anyway). Needs root.
set -euo pipefail
# dockerd, runc, debootstrap and chroot live in the sbin folders, which a plain user PATH lacks.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

IMAGE="${1:-pyrocketmq-base:bookworm}"
EXTRA="${2:-}"
SUITE=bookworm
PACKAGES="python3,python3-venv,python3-pip,ca-certificates,tini${EXTRA:+,$EXTRA}"

if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base-image: $IMAGE exists (FORCE=1 rebuilds)"
  exit 0
fi

mirror_from_host() {
  # deb822 files: the URIs line of the stanza whose Suites hold the bare suite name.
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk -v suite="$SUITE" '
      /^[[:space:]]*$/ { if (uri != "" && hit) { print uri; done=1; exit } uri=""; hit=0; next }
      /^URIs:/ { uri=$2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit=1 }
      END { if (!done && uri != "" && hit) print uri }' "$f"
  done
  # one-line files: "deb [opts] URI bookworm main"
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v suite="$SUITE" '$1 == "deb" { for (i = 2; i < NF; i++) if ($(i + 1) == suite && $i ~ /:\/\//) { print $i; exit } }' || true
}

MIRROR="${MIRROR:-$(mirror_from_host | head -n1)}"
if [[ -z "$MIRROR" ]]; then
  echo "base-image: no $SUITE mirror found in the host's apt sources; set MIRROR=..." >&2
  exit 1
fi
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pyrocketmq-base.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"
echo "base-image: debootstrap $SUITE ($PACKAGES) -> $IMAGE"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
  tail -n 30 "$WORK/debootstrap.log" >&2
  exit 1
}

# No mirror inside the image; trim what a runtime image never reads.
rm -f "$ROOTFS"/etc/apt/sources.list "$ROOTFS"/etc/apt/sources.list.d/*
: >"$ROOTFS/etc/apt/sources.list"
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/cache/debconf/*-old \
  "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/* \
  "$ROOTFS"/tmp/* "$ROOTFS"/root/.cache
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
find "$ROOTFS/usr/lib/python3" "$ROOTFS/usr/lib/python3.11" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true

tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  - "$IMAGE" >/dev/null
docker image ls "$IMAGE"
