#!/usr/bin/env bash
# Stops the processes test/cluster/up.sh started for this CLUSTER_DIR, and
# only those (by their pid files): first kwok, the scheduler and the
# controller manager, then kube-apiserver, then etcd. Each gets SIGTERM, then
# SIGKILL if it has not exited within STENCIL_STOP_TIMEOUT seconds
# (default 10). etcd data and logs are left for inspection; up.sh starts
# from an empty etcd.
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"

start=$(now)
timeout=${STENCIL_STOP_TIMEOUT:-10}
stopped=0
gone=()

# stop NAME... terminates the named components and waits for them to exit.
stop() {
  local c pid live=() deadline
  for c in "$@"; do
    if pid=$(pid_of "$c"); then
      kill -TERM "$pid" 2>/dev/null || true
      live+=("$c:$pid")
    fi
  done
  deadline=$((SECONDS + timeout))
  for entry in "${live[@]}"; do
    c=${entry%%:*} pid=${entry#*:}
    while running "$pid"; do
      if ((SECONDS >= deadline)); then
        echo "cluster: $c (pid $pid) did not exit within ${timeout}s of SIGTERM; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
        # SIGKILL cannot be caught; the process is gone once the kernel acts on it.
        while running "$pid" && ((SECONDS < deadline + 5)); do sleep 0.1; done
        break
      fi
      sleep 0.1
    done
    if running "$pid"; then
      echo "cluster: $c (pid $pid) is still running" >&2
      exit 1
    fi
    stopped=$((stopped + 1))
    gone+=("$pid")
  done
  for c in "$@"; do rm -f "$pids/$c.pid"; done
}

if ! compgen -G "$pids/*.pid" >/dev/null; then
  echo "cluster: not running (no pid files in $pids)"
  exit 0
fi
stop kwok kube-scheduler kube-controller-manager
stop kube-apiserver
stop etcd
# Give init a moment to reap them, so that they do not linger in ps as zombies.
deadline=$((SECONDS + 5))
for pid in "${gone[@]}"; do
  while [ -e "/proc/$pid" ] && ((SECONDS < deadline)); do sleep 0.1; done
done
echo "cluster: down in $(since "$start")s ($stopped process(es) stopped)"
