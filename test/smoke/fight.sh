#!/usr/bin/env bash
# Another writer that keeps reverting a field stencil sets does not make
# stencil write in a loop: after a burst of corrections they are limited to
# one per 10s, the WebApp says Throttled=True (reason FieldFight) with a
# Warning event, and once the other writer stops, stencil sets the field back
# and the condition goes away. The condition and the one Warning event of the
# episode name the other field manager (kubectl-set), read from managedFields.
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
msg=$(condition webapp/demo Throttled message)
case $msg in
  *kubectl-set*) ;;
  *) fail "Throttled message does not name the other field manager (kubectl-set): $msg" ;;
esac
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
# Identical events are aggregated into one object with a count: sum them.
fights=$(kn get events --field-selector reason=FieldFight -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{ n += $1 } END { print n + 0 }')
[ "$fights" -eq 1 ] || fail "$fights FieldFight Warning events in one episode, want 1"
ok "one FieldFight Warning event for the episode, naming kubectl-set"

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
# The episode ends once no correction was denied for burst x interval (50s).
wait_for 90 "Throttled to be removed" no_throttle
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "image back to registry.k8s.io/pause:3.10, no Throttled condition, Ready=True"
