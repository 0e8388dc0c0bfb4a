#!/usr/bin/env bash
# Another writer that keeps reverting a field stencil sets does not make
# stencil write in a loop: after a burst of corrections they are limited to
# one per 10s, the WebApp says Throttled=True (reason FieldFight) with a
# Warning event, and once the other writer stops, stencil sets the field back
# and the condition goes away.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace fight
install_crds
start_stencil
apply_samples_ready webapp

step "a second writer sets the image back to its own value whenever it changes"
# The adversary polls and writes as fast as kubectl allows; it is stopped
# when the scenario ends.
(
  while true; do
    img=$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].image}' 2>/dev/null) || true
    [ "$img" = registry.k8s.io/pause:theirs ] ||
      kn set image deployment/demo web=registry.k8s.io/pause:theirs >/dev/null 2>&1 || true
    sleep 0.1
  done
) &
fighter=$!
defer kill "$fighter"
start=$SECONDS
throttled() { [ "$(condition webapp/demo Throttled status)" = True ]; }
wait_for 60 "Throttled=True" throttled
wait_for 30 "a FieldFight event" has_event FieldFight
elapsed=$((SECONDS - start))
ok "Throttled=True ($(condition webapp/demo Throttled reason)) after ${elapsed}s; $(kn get events --field-selector reason=FieldFight -o jsonpath='{.items[0].message}')"

step "while the fight goes on, corrections come at most one per 10s"
# Two consecutive corrections once throttled: the time between them is the
# token bucket's refill interval, not the fighter's speed (about 0.2s).
base=$(metric stencil_child_writes_total)
wait_for 30 "a throttled correction" metric_at_least stencil_child_writes_total $((base + 1))
t1=$EPOCHREALTIME
wait_for 30 "the next throttled correction" metric_at_least stencil_child_writes_total $((base + 2))
gap=$(awk -v a="$t1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
awk -v g="$gap" 'BEGIN { exit !(g >= 8) }' || fail "corrections ${gap}s apart while throttled, want about 10s"
ok "consecutive corrections ${gap}s apart while the other writer reverts within a fraction of a second"

step "when the other writer stops, stencil sets the image back and the condition clears"
kill "$fighter"
wait "$fighter" 2>/dev/null || true
image_back() {
  local got
  got=$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].image}')
  [ "$got" = registry.k8s.io/pause:3.10 ] || { echo "image is '$got'"; return 1; }
}
wait_for 60 "the image to be set back" image_back
no_throttle() { [ -z "$(condition webapp/demo Throttled status)" ]; }
wait_for 60 "Throttled to be removed" no_throttle
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "image back to registry.k8s.io/pause:3.10, no Throttled condition, Ready=True"
