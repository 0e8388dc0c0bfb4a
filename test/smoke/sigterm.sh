#!/usr/bin/env bash
# SIGTERM stops the controller promptly with status 0, releasing its Lease;
# a new process takes over and converges without writing anything. Under
# leader election too, SIGTERM in the middle of a burst drains in-flight
# reconciles (no write cut short) and exits 0.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace sigterm
install_crds
start_stencil --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-smoke

apply_samples_ready webapp memcached
holder=$(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}')
[ -n "$holder" ] || fail "lease/stencil-smoke has no holder"

step "SIGTERM: exit status 0 within 25s"
stop_stencil 25
expect_eq "exit status" 0 "$STENCIL_RC"
grep -q 'Stopped cleanly' "$STENCIL_LOG" || fail "no 'Stopped cleanly' in $STENCIL_LOG"
ok "stencil exited 0 ${STENCIL_STOP_SECONDS}s after SIGTERM"

step "the Lease was released"
expect_eq "lease holder after exit" "" "$(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}')"
ok "lease/stencil-smoke had holder $holder, now none"

step "a new process takes over and finds nothing to change"
# What only stencil changes: the resourceVersions of the custom resources
# (status) and Services, and the Deployments' generation (their status is the
# Deployment controller's, and may still move after Ready).
rvs() {
  kn get services,webapps,memcacheds -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion} {end}'
  kn get deployments -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}#{.metadata.generation} {end}'
}
before=$(rvs)
start_stencil --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-smoke
lease_held() { [ -n "$(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}')" ]; }
wait_for 30 "a new Lease holder" lease_held
wait_for 30 "both resources reconciled by the new process" metric_at_least stencil_reconcile_total 2
expect_eq "what stencil writes, after the restart" "$before" "$(rvs)"
ok "new holder $(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}'), $(metric stencil_reconcile_total) reconciles, $(metric stencil_child_writes_total) child writes, $(metric stencil_status_patches_total) status patches; no object changed"

step "SIGTERM under leader election in the middle of a burst: in-flight reconciles finish, exit 0"
for i in $(seq -w 1 40); do
  printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: burst-%s}\nspec: {image: registry.k8s.io/pause:3.10, replicas: 1}\n---\n' "$i"
done | create_once kn apply -f - >/dev/null
base=$(metric stencil_reconcile_total)
wait_for 30 "the burst to be under way" metric_at_least stencil_reconcile_total $((base + 1))
stop_stencil 30
expect_eq "exit status after SIGTERM mid-burst" 0 "$STENCIL_RC"
grep -q 'Shutting down, draining the work queue' "$STENCIL_LOG" || fail "no drain in $STENCIL_LOG"
cut=$(grep -c 'context canceled' "$STENCIL_LOG" || true)
expect_eq "writes cut short by the shutdown (context canceled)" 0 "$cut"
ok "exit 0 ${STENCIL_STOP_SECONDS}s after SIGTERM, $(grep -o 'queued=[0-9]*' "$STENCIL_LOG" | tail -1) at the signal, no write cut short"
start_stencil --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-smoke
kn wait webapps --all --for=condition=Ready --timeout=120s >/dev/null
ok "after a restart, all $(kn get webapps -o name | wc -l) WebApps Ready"
