# Sourced by the scripts in test/cluster: where the local control plane lives,
# which loopback ports it uses, and the helpers they share.
#
# Everything is configurable by environment so that two planes can run side by
# side (give the second one another CLUSTER_DIR and other ports):
#
#   CLUSTER_DIR                 state directory (default .cluster; a relative
#                               path is taken from the repository root)
#   STENCIL_ETCD_PORT           etcd client port (default 2379)
#   STENCIL_ETCD_PEER_PORT      etcd peer port (default 2380)
#   STENCIL_APISERVER_PORT      kube-apiserver port (default 6443)
#   STENCIL_KCM_PORT            kube-controller-manager secure port (default 10257)
#   STENCIL_SCHEDULER_PORT      kube-scheduler secure port (default 10259)
#   STENCIL_NODES               number of fake (kwok) nodes (default 1)
#   STENCIL_APISERVER_FEATURE_GATES  kube-apiserver --feature-gates (default
#                               ShardedListAndWatch=true; empty turns it off)
#
# Only 127.0.0.1 is ever bound.

# The variables are for the scripts that source this file.
# shellcheck disable=SC2034

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$root/bin"

CLUSTER_DIR=${CLUSTER_DIR:-.cluster}
case "$CLUSTER_DIR" in
  /*) ;;
  *) CLUSTER_DIR="$root/$CLUSTER_DIR" ;;
esac
STENCIL_ETCD_PORT=${STENCIL_ETCD_PORT:-2379}
STENCIL_ETCD_PEER_PORT=${STENCIL_ETCD_PEER_PORT:-2380}
STENCIL_APISERVER_PORT=${STENCIL_APISERVER_PORT:-6443}
STENCIL_KCM_PORT=${STENCIL_KCM_PORT:-10257}
STENCIL_SCHEDULER_PORT=${STENCIL_SCHEDULER_PORT:-10259}
STENCIL_NODES=${STENCIL_NODES:-1}

pki="$CLUSTER_DIR/pki"
logs="$CLUSTER_DIR/logs"
pids="$CLUSTER_DIR/pids"
kubeconfig="$CLUSTER_DIR/kubeconfig"

# The processes of a plane, in start order; down.sh stops them in reverse.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# now prints seconds since the epoch with millisecond precision.
now() { local t=$EPOCHREALTIME; echo "${t%???}"; }

# since START prints the seconds elapsed since START (from now), e.g. 3.2.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_of NAME prints the pid recorded for component NAME if that process is
# still running the binary from ./bin (a stale pid file, or a pid reused by
# another program, prints nothing and fails).
pid_of() {
  local f="$pids/$1.pid" pid exe
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${exe% (deleted)}" = "$bin/$1" ] || return 1
  echo "$pid"
}

# running PID succeeds while PID is a live process. An exited process stays a
# zombie until its parent reaps it (init, once up.sh has exited, which may
# take a while); a zombie has stopped, so it does not count.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# kc runs kubectl against this plane as cluster admin.
kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# api_ready succeeds when kube-apiserver answers /readyz with ok.
api_ready() {
  [ -f "$kubeconfig" ] || return 1
  [ "$(kc get --raw /readyz --request-timeout=2s 2>/dev/null)" = ok ]
}

# plane_up succeeds when every component is running and the API is ready.
plane_up() {
  local c
  for c in "${components[@]}"; do pid_of "$c" >/dev/null || return 1; done
  api_ready
}

# port_busy PORT succeeds when something accepts connections on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_get PORT PATH prints the response (status line, headers, body) to
# GET PATH on 127.0.0.1:PORT, or fails if nothing answers. bash's /dev/tcp:
# a fresh machine has no curl.
http_get() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
  timeout 2 cat <&3
  exec 3<&-
}

# http_status PORT PATH prints the status code of GET PATH on 127.0.0.1:PORT.
http_status() {
  local response
  response=$(http_get "$1" "$2") || return 1
  response=${response#* }
  echo "${response%% *}"
}
