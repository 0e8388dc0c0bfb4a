#!/usr/bin/env bash
# run.sh [STENCIL-FLAG...] is the body of make run, which has already started
# the local plane and built bin/stencil: it installs the example CRDs, runs
# the controller in the foreground with the example config, and applies the
# samples once the controller has started. Ctrl-C stops the controller; the
# plane stays up until make cluster-down.
#
# "Started" is the first log line matching STENCIL_READY_PATTERN (an
# extended regexp, default: Starting workers|Started workers|caches? (are )?synced),
# or STENCIL_READY_TIMEOUT seconds (default 30) without one.
set -euo pipefail
source "$(dirname "$0")/env.sh"

ready_pattern=${STENCIL_READY_PATTERN:-'Starting workers|Started workers|[Cc]aches? (are )?synced'}
ready_timeout=${STENCIL_READY_TIMEOUT:-30}
cd "$root"

plane_up || { echo "run: the local plane is not up; use make run or make cluster-up" >&2; exit 1; }
[ -x bin/stencil ] || { echo "run: bin/stencil is missing; use make run or make build" >&2; exit 1; }
[ -f crds/stencil.yaml ] || { echo "run: crds/stencil.yaml is missing" >&2; exit 1; }
shopt -s nullglob
crds=(crds/*-crd.yaml)
[ ${#crds[@]} -gt 0 ] || { echo "run: no crds/*-crd.yaml to install" >&2; exit 1; }

crd_args=()
for f in "${crds[@]}"; do crd_args+=(-f "$f"); done
kc apply "${crd_args[@]}"
kc wait --for=condition=Established "${crd_args[@]}" --timeout=60s

export KUBECONFIG="$kubeconfig"
log="$logs/stencil.log"
: >"$log"

# Applies the samples once the controller's log says it has started, then
# prints what to try. Being a background job it ignores Ctrl-C; the EXIT trap
# ends it if the controller stops first.
apply_samples() {
  local deadline=$((SECONDS + ready_timeout))
  until grep -Eq "$ready_pattern" "$log"; do
    if ((SECONDS >= deadline)); then
      echo "run: no log line matching /$ready_pattern/ after ${ready_timeout}s; applying the samples anyway"
      break
    fi
    sleep 0.2
  done
  if [ -d crds/samples ]; then
    kc apply -f crds/samples/ | sed 's/^/run: /'
  fi
  cat <<EOF

run: the controller is running; in another terminal try:
  export KUBECONFIG=$kubeconfig
  bin/kubectl get -f crds/samples/
  bin/kubectl describe -f crds/samples/
  bin/kubectl get deployments,services,configmaps -A
  bin/kubectl get events -A --sort-by=.lastTimestamp
run: Ctrl-C stops the controller; the cluster stays up until make cluster-down
run: controller log: $log

EOF
}
apply_samples &
helper=$!
trap 'kill "$helper" 2>/dev/null || true' EXIT

# The controller runs in the foreground so that Ctrl-C reaches it directly.
# tee ignores SIGINT so that the controller's shutdown logs still get through.
echo "run: bin/stencil run --config crds/stencil.yaml --kubeconfig $kubeconfig $*"
rc=0
bin/stencil run --config crds/stencil.yaml --kubeconfig "$kubeconfig" "$@" 2>&1 |
  (trap '' INT; exec tee -a "$log") || rc=$?
echo "run: controller exited with status $rc; the cluster is still up (make cluster-down stops it)"
exit "$rc"
