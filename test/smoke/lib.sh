# Helpers for the kubectl smoke scenarios in test/smoke; source it first:
#
#   source "$(dirname "$0")/lib.sh"
#   use_namespace plane          # fresh namespace in $NS, deleted on exit
#   step "what is being checked"
#   create_once kn apply -f - <<EOF ... EOF
#                                # kubectl in $NS; create_once takes the
#                                # AlreadyExists of a retried create for
#                                # success (test/cluster/env.sh)
#   wait_for 60 "the thing to happen" CMD...
#   ok "what was shown"
#
# Scenarios about the controller install the example CRDs (install_crds) and
# start their own `stencil run`, scoped to $NS (start_stencil), so that each
# one sees only its own objects and can stop, restart or reconfigure it.
#
# A scenario is a plain bash script run by test/cluster/smoke.sh with
# KUBECONFIG set; it passes by exiting 0. Scenarios never sleep to wait for
# something: they use kubectl wait or wait_for, which poll with a deadline.
# STENCIL_SMOKE_KEEP=1 keeps the namespace of a failed scenario for a look.

set -euo pipefail

smoke_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# http_status and the plane's paths; KUBECONFIG below says which plane.
# shellcheck source=test/cluster/env.sh
source "$smoke_root/test/cluster/env.sh"
KUBECTL=${KUBECTL:-$smoke_root/bin/kubectl}
STENCIL=${STENCIL:-$smoke_root/bin/stencil}
# Controller logs of every scenario, kept after the run for a look (the
# next cluster-up clears them with the rest of the logs).
SMOKE_LOGS=${STENCIL_SMOKE_LOGS:-$logs/smoke}
: "${KUBECONFIG:?KUBECONFIG must name the cluster to test; use make smoke}"
export KUBECONFIG
SCENARIO=$(basename "$0" .sh)
NS=""
STENCIL_PID=""
STENCIL_LOG=""
STENCIL_HEALTH=""
STENCIL_METRICS=""
CONFIG_DIR=""
DEFERRED=()

# defer CMD... runs CMD when the scenario exits, before the namespace goes
# (for what a scenario makes outside its namespace).
defer() { DEFERRED+=("$(printf '%q ' "$@")"); }

# k runs kubectl; kn runs it in the scenario's namespace.
k() { "$KUBECTL" "$@"; }
kn() { "$KUBECTL" --namespace "$NS" "$@"; }

# step says what the scenario checks next; ok says that it held.
step() { echo "[$SCENARIO] check: $*"; }
ok() { echo "[$SCENARIO] ok: $*"; }

# fail prints why the scenario failed and exits non-zero.
fail() {
  echo "[$SCENARIO] FAIL: $*" >&2
  # The fault runner's summary line shows why, not only that, it failed.
  [ -z "${STENCIL_FAULTS_FIGURES:-}" ] || echo "FAIL: ${*:0:600}" >"$STENCIL_FAULTS_FIGURES"
  exit 1
}

# expect_eq WHAT WANT GOT fails unless GOT equals WANT.
expect_eq() {
  [ "$3" = "$2" ] || fail "$1: want '$2', got '$3'"
}

# wait_for SECONDS WHAT CMD [ARG...] runs CMD every quarter second until it
# succeeds, and fails the scenario with CMD's last output after SECONDS. It
# fails at once if the scenario's controller has been denied access (see
# fail_if_denied): a missing RBAC rule shows in seconds, not at a timeout.
wait_for() {
  local limit=$1 what=$2 out
  shift 2
  local deadline=$((SECONDS + limit))
  while ! out=$("$@" 2>&1); do
    fail_if_denied "waiting for $what"
    if ((SECONDS >= deadline)); then
      fail "timed out after ${limit}s waiting for $what; last output: $out"
    fi
    sleep 0.25
  done
}

# use_namespace NAME creates a fresh namespace smoke-NAME-<random> and sets NS.
# When the scenario exits the namespace is deleted (without waiting for it to
# go away); if the scenario failed, what was in it is printed first.
use_namespace() {
  NS="smoke-$1-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  create_once k create namespace "$NS" >/dev/null
  k label namespace "$NS" stencil.dev/smoke="$SCENARIO" >/dev/null
  trap _cleanup EXIT
  echo "[$SCENARIO] namespace $NS"
}

# install_crds applies the example CRDs (crds/*-crd.yaml) and waits until
# they are served; applying an unchanged CRD is a no-op, so every scenario
# may call it.
install_crds() {
  local args=() f
  for f in "$smoke_root"/crds/*-crd.yaml; do args+=(-f "$f"); done
  k apply --server-side --force-conflicts "${args[@]}" >/dev/null
  k wait --for=condition=Established "${args[@]}" --timeout=60s >/dev/null
}

# take_port VAR sets VAR to a loopback port nothing listens on, below the
# kernel's ephemeral range (32768 and up on Linux): a port from that range
# can be taken by an outgoing connection between this check and the bind
# (a leader-pause run failed so: "bind: address already in use"). It never
# hands out a port it handed out before in this shell: ports drawn before
# any of them is bound (countproxy's six listeners, replicas launched
# together) must differ, which port_busy alone cannot tell (ring-together
# failed so, its fourth listener drawn on its first's port). It runs in
# this shell, not in $(...), so that it remembers.
TAKEN_PORTS=" "
take_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 12000))
    if [[ $TAKEN_PORTS != *" $p "* ]] && ! port_busy "$p"; then
      TAKEN_PORTS+="$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
  fail "no free loopback port found"
}

# fail_if_denied WHILE fails the scenario if the controller's log shows an
# authorization error ("forbidden"), unless the scenario expects one and set
# STENCIL_LOG_DENIED_OK.
STENCIL_LOG_DENIED_OK=""
fail_if_denied() {
  local denied
  [ -n "$STENCIL_LOG" ] && [ -z "$STENCIL_LOG_DENIED_OK" ] || return 0
  if denied=$(grep -m1 -i forbidden "$STENCIL_LOG"); then
    fail "$1, the controller was denied: ${denied:0:400}"
  fi
}

# stencil_ready succeeds when the running controller's /readyz answers 200.
stencil_ready() { [ "$(http_status "$STENCIL_HEALTH" /readyz)" = 200 ]; }

# start_stencil [--config F | --watches F] [FLAG...] starts `stencil run` in
# the background, watching only $NS, with the example config
# crds/stencil.yaml unless --config (or helm-operator's --watches) is given
# first, and returns once its /readyz answers 200. Output goes to
# $STENCIL_LOG; the controller is stopped when the scenario exits.
start_stencil() {
  local config="$smoke_root/crds/stencil.yaml" source=--config
  if [ "${1:-}" = --config ] || [ "${1:-}" = --watches ]; then
    source=$1
    config=$2
    shift 2
  fi
  [ -x "$STENCIL" ] || fail "$STENCIL is missing; make smoke builds it (make build)"
  [ -z "$STENCIL_PID" ] || fail "start_stencil: a controller is already running (pid $STENCIL_PID)"
  mkdir -p "$SMOKE_LOGS"
  take_port STENCIL_HEALTH
  take_port STENCIL_METRICS
  STENCIL_LOG="$SMOKE_LOGS/$SCENARIO-$NS.log"
  echo "--- stencil run $source $config --namespace $NS $*" >>"$STENCIL_LOG"
  "$STENCIL" run "$source" "$config" --namespace "$NS" --kubeconfig "$KUBECONFIG" \
    --metrics-bind-address "127.0.0.1:$STENCIL_METRICS" --health-probe-bind-address "127.0.0.1:$STENCIL_HEALTH" --resync 1m "$@" \
    >>"$STENCIL_LOG" 2>&1 &
  STENCIL_PID=$!
  local deadline=$((SECONDS + 60))
  until stencil_ready 2>/dev/null; do
    if ! kill -0 "$STENCIL_PID" 2>/dev/null; then
      wait "$STENCIL_PID" || true
      STENCIL_PID=""
      fail "stencil run exited before it was ready; log $STENCIL_LOG: $(tail -n 20 "$STENCIL_LOG")"
    fi
    fail_if_denied "starting stencil run"
    ((SECONDS < deadline)) || fail "stencil run not ready after 60s; log $STENCIL_LOG"
    sleep 0.1
  done
}

# scrape_metrics prints the running controller's /metrics exposition.
scrape_metrics() { http_get "$STENCIL_METRICS" /metrics; }

# metric NAME prints the sum of every series of metric NAME (e.g.
# stencil_reconcile_total) from the running controller's /metrics.
metric() {
  scrape_metrics | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { printf "%d", s }'
}

# metric_at_least NAME N succeeds once metric NAME sums to N or more.
metric_at_least() {
  local got
  got=$(metric "$1") || return 1
  ((got >= $2)) || { echo "$1 is $got, want >= $2"; return 1; }
}

# stop_stencil [SECONDS] sends SIGTERM to the controller and waits at most
# SECONDS (default 30) for it to exit; it sets STENCIL_RC to the exit status
# and STENCIL_STOP_SECONDS to how long the exit took. It fails the scenario
# if the controller did not exit in time (and kills it).
STENCIL_RC=""
STENCIL_STOP_SECONDS=""
stop_stencil() {
  local limit=${1:-30} start=$EPOCHREALTIME rc=0 state
  [ -n "$STENCIL_PID" ] || fail "stop_stencil: no controller running"
  kill -TERM "$STENCIL_PID" 2>/dev/null || true
  local deadline=$((SECONDS + limit))
  # Poll until the process has exited (a zombie until wait reaps it).
  while state=$(awk '{ print $3 }' "/proc/$STENCIL_PID/stat" 2>/dev/null) && [ "$state" != Z ]; do
    if ((SECONDS >= deadline)); then
      kill -KILL "$STENCIL_PID" 2>/dev/null || true
      wait "$STENCIL_PID" 2>/dev/null || true
      STENCIL_PID=""
      fail "stencil run did not exit within ${limit}s of SIGTERM"
    fi
    sleep 0.05
  done
  wait "$STENCIL_PID" || rc=$?
  STENCIL_PID=""
  STENCIL_RC=$rc
  STENCIL_STOP_SECONDS=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}

# apply_samples_ready NAME... applies crds/samples/NAME.yaml (webapp,
# memcached) and waits until each resource is Ready=True.
apply_samples_ready() {
  local args=() n
  for n in "$@"; do args+=(-f "$smoke_root/crds/samples/$n.yaml"); done
  create_once kn apply "${args[@]}" >/dev/null
  kn wait "${args[@]}" --for=condition=Ready --timeout=90s >/dev/null
}

# copy_config makes a private copy of crds/ (the example stencil.yaml and its
# templates) in $CONFIG_DIR, a temporary directory removed when the scenario
# exits, for scenarios that change the config or a template:
#   copy_config; sed -i '/service/d' "$CONFIG_DIR/stencil.yaml"
#   start_stencil --config "$CONFIG_DIR/stencil.yaml"
copy_config() {
  [ -n "$CONFIG_DIR" ] || CONFIG_DIR=$(mktemp -d)
  cp -r "$smoke_root/crds/." "$CONFIG_DIR/"
}

# Getters for the jsonpath checks scenarios make again and again.
# condition KIND/NAME TYPE FIELD prints .status.conditions[TYPE].FIELD.
condition() {
  kn get "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].$3}"
}
# ready_reason KIND/NAME prints "STATUS REASON" of the Ready condition.
ready_reason() {
  echo "$(condition "$1" Ready status) $(condition "$1" Ready reason)"
}
# expect_ready_reason KIND/NAME "STATUS REASON" succeeds when the Ready
# condition has that status and reason (for wait_for).
expect_ready_reason() {
  local got
  got=$(ready_reason "$1")
  [ "$got" = "$2" ] || { echo "Ready is '$got', want '$2'"; return 1; }
}
# gone KIND/NAME succeeds once the object does not exist.
gone() {
  local out
  out=$(kn get "$1" -o name 2>&1) && { echo "$1 still exists"; return 1; }
  [[ "$out" == *NotFound* ]] || { echo "$out"; return 1; }
}
# has_event REASON succeeds when $NS holds an event with that reason.
has_event() {
  [ -n "$(kn get events --field-selector "reason=$1" -o name)" ]
}

_cleanup() {
  local rc=$? d
  if [ -n "$STENCIL_PID" ]; then
    kill -TERM "$STENCIL_PID" 2>/dev/null || true
    wait "$STENCIL_PID" 2>/dev/null || true
    STENCIL_PID=""
  fi
  if [ "$rc" != 0 ] && [ -n "$STENCIL_LOG" ]; then
    echo "[$SCENARIO] last lines of the controller log $STENCIL_LOG:" >&2
    tail -n 30 "$STENCIL_LOG" >&2 || true
  fi
  for d in "${DEFERRED[@]}"; do eval "$d" >/dev/null 2>&1 || true; done
  [ -z "$CONFIG_DIR" ] || rm -rf "$CONFIG_DIR"
  [ -n "$NS" ] || return "$rc"
  if [ "$rc" != 0 ]; then
    echo "[$SCENARIO] objects in $NS at failure:" >&2
    kn get all,configmaps,events -o wide >&2 2>&1 || true
    if [ "${STENCIL_SMOKE_KEEP:-}" = 1 ]; then
      echo "[$SCENARIO] keeping namespace $NS (STENCIL_SMOKE_KEEP=1)" >&2
      return "$rc"
    fi
  fi
  k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  return "$rc"
}
