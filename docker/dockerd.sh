#!/usr/bin/env bash
# Make a Docker daemon available without a bridge network, or stop the one this script started.
#
#   docker/dockerd.sh start [STATE_DIR]   install docker.io if dockerd is missing; start dockerd unless one answers
#   docker/dockerd.sh stop  [STATE_DIR]   stop the daemon only if `start` started it (pid file in STATE_DIR)
#
# The daemon runs with --bridge=none --iptables=false --ip-masq=false: containers use host or no networking.
# STATE_DIR defaults to .build/dockerd (pid file, log). Needs root for the install and the daemon.
set -euo pipefail
# dockerd, runc, debootstrap and chroot live in the sbin folders, which a plain user PATH lacks.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

ACTION="${1:?start or stop}"
STATE="${2:-.build/dockerd}"
PIDFILE="$STATE/dockerd.pid"
mkdir -p "$STATE"

case "$ACTION" in
  start)
    if docker info >/dev/null 2>&1; then
      exit 0
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "dockerd: installing docker.io" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
    fi
    nohup dockerd --bridge=none --iptables=false --ip-masq=false >"$STATE/dockerd.log" 2>&1 &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && { echo "dockerd: started (pid $(cat "$PIDFILE"))" >&2; exit 0; }
      kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
      sleep 0.5
    done
    echo "dockerd: did not come up; see $STATE/dockerd.log" >&2
    tail -n 20 "$STATE/dockerd.log" >&2 || true
    exit 1
    ;;
  stop)
    [[ -f "$PIDFILE" ]] || exit 0
    pid="$(cat "$PIDFILE")"
    rm -f "$PIDFILE"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.5; done
      echo "dockerd: pid $pid still running after 30 s" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 start|stop [STATE_DIR]" >&2
    exit 2
    ;;
esac
