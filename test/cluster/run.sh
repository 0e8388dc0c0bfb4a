#!/usr/bin/env bash
# run.sh [STENCIL-FLAG...] is the body of make run, which has already started
# the local plane and built bin/stencil: it installs the example CRDs, runs
# the controller in the foreground with the example config, and applies the
# samples once the controller's /readyz answers 200. Ctrl-C stops the
# controller; the plane stays up until make cluster-down.
#
# The controller's health and metrics endpoints listen on loopback only, on
# STENCIL_HEALTH_PORT (default 8081) and STENCIL_METRICS_PORT (default 8080).
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"

health_port=${STENCIL_HEALTH_PORT:-8081}
metrics_port=${STENCIL_METRICS_PORT:-8080}
ready_timeout=60
cd "$root"

plane_up || { echo "run: the local plane is not up; use make run or make cluster-up" >&2; exit 1; }
[ -x bin/stencil ] || { echo "run: bin/stencil is missing; use make run or make build" >&2; exit 1; }
[ -f crds/stencil.yaml ] || { echo "run: crds/stencil.yaml is missing" >&2; exit 1; }
shopt -s nullglob
crds=(crds/*-crd.yaml)
[ ${#crds[@]} -gt 0 ] || { echo "run: no crds/*-crd.yaml to install" >&2; exit 1; }

crd_args=()
for f in "${crds[@]}"; do crd_args+=(-f "$f"); done
create_once kc apply "${crd_args[@]}"
kc wait --for=condition=Established "${crd_args[@]}" --timeout=60s

for p in "$health_port" "$metrics_port"; do
  if port_busy "$p"; then
    echo "run: 127.0.0.1:$p is in use (another controller?); set STENCIL_HEALTH_PORT/STENCIL_METRICS_PORT" >&2
    exit 1
  fi
done

export KUBECONFIG="$kubeconfig"
log="$logs/stencil.log"
: >"$log"

# controller_ready succeeds when GET /readyz on the health port answers 200.
controller_ready() { [ "$(http_status "$health_port" /readyz)" = 200 ]; }

# Applies the samples once the controller is ready, then prints what to try.
# Being a background job it ignores Ctrl-C; the EXIT trap ends it if the
# controller stops first.
apply_samples() {
  local deadline=$((SECONDS + ready_timeout))
  until controller_ready 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      echo "run: the controller's /readyz on 127.0.0.1:$health_port is not 200 after" \
        "${ready_timeout}s; not applying the samples (see $log)"
      return
    fi
    sleep 0.2
  done
  if [ -d crds/samples ]; then
    create_once kc apply -f crds/samples/ | sed 's/^/run: /'
  fi
  cat <<EOF

run: the controller is running; in another terminal try:
  export KUBECONFIG=$kubeconfig
  bin/kubectl wait --for=condition=Ready -f crds/samples/ --timeout=60s
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
args=(--config crds/stencil.yaml --kubeconfig "$kubeconfig" --manage-crds
  --health-probe-bind-address "127.0.0.1:$health_port" --metrics-bind-address "127.0.0.1:$metrics_port" "$@")
echo "run: bin/stencil run ${args[*]}"
rc=0
bin/stencil run "${args[@]}" 2>&1 |
  (trap '' INT; exec tee -a "$log") || rc=$?
echo "run: controller exited with status $rc; the cluster is still up (make cluster-down stops it)"
exit "$rc"
