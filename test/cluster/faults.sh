#!/usr/bin/env bash
# faults.sh [SCENARIO...] runs the fault scenarios, test/faults/*.sh except
# lib.sh, against the plane in KUBECONFIG (make faults provides one and
# builds bin/countproxy and bin/faultcheck). A SCENARIO is a name such as
# "apiserver-kill"; without any, every scenario runs, one at a time: some
# stop the plane's API server or etcd. Each runs in its own bash process, at
# most STENCIL_FAULTS_TIMEOUT seconds (default 420), and gets one PASS or
# FAIL line with its figures; the summary and the total time end the output.
# Exits non-zero if any scenario failed.
#
# One scenario's failure never reaches the next one's set-up: once a
# scenario has ended, whatever it left running is stopped (its process
# group), the plane is made whole, and every namespace a scenario made
# (label stencil.dev/faults) is deleted and waited for, at most
# STENCIL_FAULTS_SWEEP seconds (default 300; 0 deletes without waiting).
# STENCIL_SMOKE_KEEP=1 keeps the namespaces of the scenarios that failed.
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"
# shellcheck source=test/cluster/components.sh
source "$root/test/cluster/components.sh"
faults="$root/test/faults"
limit=${STENCIL_FAULTS_TIMEOUT:-420}
sweep_limit=${STENCIL_FAULTS_SWEEP:-300}
kubectl=${KUBECTL:-$bin/kubectl}

: "${KUBECONFIG:?KUBECONFIG must name the cluster to test; use make faults}"

scenarios=()
if [ $# -gt 0 ]; then
  for name in "$@"; do
    name=${name%.sh}
    f="$faults/${name##*/}.sh"
    if [ ! -f "$f" ] || [ "${name##*/}" = lib ]; then echo "faults: no scenario $f" >&2; exit 2; fi
    scenarios+=("$f")
  done
else
  for f in "$faults"/*.sh; do
    [ "$(basename "$f")" = lib.sh ] || scenarios+=("$f")
  done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "faults: no scenarios in $faults" >&2; exit 1; }

# group_running PGID succeeds while a process of process group PGID runs
# (a zombie, waiting for init to reap it, has stopped: it does not count).
group_running() {
  local stat rest
  for stat in /proc/[0-9]*/stat; do
    read -r rest 2>/dev/null <"$stat" || continue
    rest=${rest##*) }                      # state ppid pgrp ...
    [ "${rest%% *}" != Z ] || continue
    rest=${rest#* }
    rest=${rest#* }
    [ "${rest%% *}" != "$1" ] || return 0
  done
  return 1
}

# stop_leftovers NAME PGID stops what scenario NAME left running in its
# process group PGID: stencil replicas, the counting proxy, a kubectl, when
# its cleanup did not run (SIGKILLed at its timeout) or did not finish.
# SIGTERM, then SIGKILL after 10 s. The plane's components, even those the
# scenario restarted, are not in it (launch starts them with setsid).
stop_leftovers() {
  group_running "$2" || return 0
  echo "faults: processes of $1 still running after it ended; stopping them" >&2
  kill -TERM -- "-$2" 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while group_running "$2"; do
    if ((SECONDS >= deadline)); then
      kill -KILL -- "-$2" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
}

# sweep_namespaces NAME deletes every namespace made by a scenario
# (use_namespace and new_namespace label them stencil.dev/faults) still
# there once scenario NAME has ended, and waits until they are gone: a
# scenario deletes its own without waiting, not at all if it was killed
# before its cleanup, and the next one's set-up must not wait on them
# within its own time limit (ring-unfiltered timed out so after
# ring-together failed), nor its figures be taken while the plane deletes
# them. With STENCIL_SMOKE_KEEP=1 the namespaces of failed scenarios stay.
sweep_namespaces() {
  local selector=stencil.dev/faults left start=$SECONDS
  if [ "${STENCIL_SMOKE_KEEP:-}" = 1 ] && [ ${#failed[@]} -gt 0 ]; then
    selector="$selector,stencil.dev/faults notin ($(IFS=,; echo "${failed[*]}"))"
  fi
  if ! left=$("$kubectl" get namespaces -l "$selector" -o name 2>&1); then
    echo "faults: cannot list the namespaces left by $1: $left" >&2
    return 0
  fi
  [ -n "$left" ] || return 0
  "$kubectl" delete namespaces -l "$selector" --wait=false >/dev/null || true
  ((sweep_limit > 0)) || return 0
  while [ -n "$left" ]; do
    if ((SECONDS - start >= sweep_limit)); then
      echo "faults: $(wc -l <<<"$left") namespaces still there ${sweep_limit}s after $1 ended: $(head -n 5 <<<"$left" | tr '\n' ' ')" >&2
      return 0
    fi
    sleep 1
    left=$("$kubectl" get namespaces -l "$selector" -o name 2>&1) || left="(cannot list: $left)"
  done
  echo "faults: the namespaces left by $1 deleted in $((SECONDS - start))s"
}

figures=$(mktemp)
# The scenario running, for the signal traps: timeout's pid, also its
# process group's id.
current=""
stop_current() {
  [ -n "$current" ] || return 0
  kill -TERM "$current" 2>/dev/null || true # timeout passes it on to the scenario
  wait "$current" 2>/dev/null || true
  stop_leftovers "$name" "$current"
}
trap 'rm -f "$figures"' EXIT
trap 'stop_current; exit 130' INT
trap 'stop_current; exit 143' TERM
passed=() failed=() lines=()
total=$SECONDS
for f in "${scenarios[@]}"; do
  name=$(basename "$f" .sh)
  echo "=== RUN   $name"
  start=$SECONDS
  : >"$figures"
  # In the background for its pid: timeout puts itself in a process group
  # of its own, which everything the scenario starts joins.
  STENCIL_FAULTS_FIGURES="$figures" timeout --kill-after=10 "$limit" bash "$f" &
  current=$!
  if wait "$current"; then
    result=PASS
    passed+=("$name")
  else
    rc=$?
    [ "$rc" = 124 ] && echo "faults: $name did not finish within ${limit}s" >&2
    result=FAIL
    failed+=("$name")
  fi
  stop_leftovers "$name" "$current"
  current=""
  # A scenario that failed half-way may leave a component stopped (or
  # still shutting down): start it again, so that the next scenario finds
  # the whole plane.
  deadline=$((SECONDS + 180))
  until plane_up; do
    for c in "${components[@]}"; do
      if ! pid=$(pid_of "$c"); then
        echo "faults: $c is not running after $name; starting it again" >&2
        start_component "$c"
      else
        kill -CONT "$pid" 2>/dev/null || true
      fi
    done
    ((SECONDS < deadline)) || { echo "faults: the plane is not up after $name" >&2; exit 1; }
    sleep 1
  done
  line=$(printf -- '--- %s  %s (%ss): %s' "$result" "$name" "$((SECONDS - start))" "$(cat "$figures")")
  echo "$line"
  lines+=("$line")
  sweep_namespaces "$name"
done

echo "faults: summary"
printf '%s\n' "${lines[@]}"
echo "faults: ${#passed[@]} passed, ${#failed[@]} failed${failed:+ (${failed[*]})} in $((SECONDS - total))s"
[ ${#failed[@]} -eq 0 ]
