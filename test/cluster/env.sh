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

# create_once CMD [ARG...] runs CMD, a kubectl call that creates objects
# (create, or a client-side apply of objects that may be new), and takes an
# AlreadyExists answer for success. Under load the API server answers a
# create whose etcd write timed out with Retry-After, and client-go sends the
# POST again although the first one was stored: the second answers
# AlreadyExists for the object the first created. It succeeds when CMD does,
# or when CMD failed and every line it wrote to stderr is an AlreadyExists
# error (or a Warning); any other error fails with CMD's status. stdin and
# stdout are CMD's; CMD's stderr is printed once it is done.
#
# Only for names the script has just drawn (a fresh random namespace, or
# objects in one): never for something that may already be there, nor for a
# create that is meant to be refused (a refused create stores nothing, so its
# retry is refused alike; call those bare).
create_once() {
  local err rc=0 line exists=0 other=0
  local re='^(Error from server \(AlreadyExists\): |error: failed to create [^:]*: )(error when creating "[^"]*": )?[^ ]+ "[^"]+" already exists$'
  { err=$("$@" 2>&1 >&3 3>&-); } 3>&1 || rc=$?
  if ((rc != 0)); then
    while IFS= read -r line; do
      if [[ "$line" =~ $re ]]; then
        exists=$((exists + 1))
      elif [ -n "$line" ] && [[ "$line" != Warning:* ]]; then
        other=$((other + 1))
      fi
    done <<<"$err"
  fi
  [ -z "$err" ] || printf '%s\n' "$err" >&2
  if ((rc != 0 && exists > 0 && other == 0)); then
    echo "create_once: taken for the answer to a retried create (the first one was stored): $*" >&2
    rc=0
  fi
  return "$rc"
}

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
