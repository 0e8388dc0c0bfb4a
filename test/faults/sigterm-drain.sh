#!/usr/bin/env bash
# SIGTERM to the leader (two replicas, --leader-elect) in the middle of a
# burst: it stops taking work, lets its in-flight reconciles finish (no write
# cut short), writes their events, releases the Lease and exits 0; the
# standby takes over at once and finishes. Every child gets exactly one
# Created event: none was lost in the shutdown.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace sigterm-drain
lease_held_by() { [ "$(leader_tag)" = "$1" ]; }
# shellcheck disable=SC2046
start_replica a $(leader_flags)
wait_for 30 "replica a to hold the Lease" lease_held_by a
# shellcheck disable=SC2046
start_replica b $(leader_flags)
ok "a leads, b stands by"

step "SIGTERM to the leader in the middle of a burst: it drains, flushes its events, exits 0"
t0=$(now_ms)
apply_workload 1 &
creates=$!
wait_for 120 "the leader to be creating children" writes_at_least child 60 a
fault_start=$(now_ms)
signal_replica a TERM
wait_replica_exit a 30
exited=$(now_ms)
wait "$creates" || fail "kubectl apply failed"
expect_eq "a's exit status after SIGTERM" 0 "${RRC[a]}"
grep -q 'Shutting down, draining the work queue' "${RLOG[a]}" || fail "no drain in ${RLOG[a]}"
for bad in 'context canceled' 'broadcaster already stopped' 'Events not all written' 'Unable to write event'; do
  n=$(grep -c "$bad" "${RLOG[a]}" || true)
  expect_eq "'$bad' in a's log" 0 "$n"
done
queued=$(grep -o 'queued=[0-9]*' "${RLOG[a]}" | tail -n 1)
a_writes=$(proxy_summary "$fault_start" "" a)
lost=$(proxy_writes "$t0" "" a | awk '$7 == 499 || $7 == 0' | wc -l)
expect_eq "a's writes cut short (no answer)" 0 "$lost"
ok "exit 0 $(secs "$fault_start" "$exited")s after SIGTERM ($queued at the signal); after the signal a wrote $(fig child "$a_writes") children, $(fig status "$a_writes") status patches, $(fig event "$a_writes") events, none cut short"

step "b takes over at once (the Lease was released), everything converges"
wait_for 30 "b to hold the Lease" lease_held_by b
took_over=$(first_write b "$fault_start")
a_restart=$(now_ms)
# shellcheck disable=SC2046
start_replica a $(leader_flags)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
ok "b's first write $(secs "$exited" "$took_over")s after a exited; all $WORKLOAD Ready $(secs "$exited" "$RECOVERED_MS")s after; since the signal: $during"

step "nothing written twice, no event lost"
a_after=$(proxy_writes "$a_restart" "" a | grep -vc ' leases ' || true)
expect_eq "writes by a since it restarted (as a standby), Lease aside" 0 "$a_after"
written=$(expect_written_once "$t0")
created_events() {
  local n
  n=$(kn get events --field-selector reason=Created -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | sort -u | grep -c . || true)
  [ "$n" = "$((WORKLOAD * 3 / 2))" ] || { echo "$n distinct Created events"; return 1; }
}
wait_for 30 "one Created event per child" created_events
ok "$written; $((WORKLOAD * 3 / 2)) Created events, one per child"

QUIET_REPLICAS="a b" quiet_window
figures "exit 0 $(secs "$fault_start" "$exited")s after SIGTERM ($queued), 0 writes cut short, $((WORKLOAD * 3 / 2))/$((WORKLOAD * 3 / 2)) Created events; b's first write $(secs "$exited" "$took_over")s after; recovered $(secs "$exited" "$RECOVERED_MS")s after the exit; since the signal $during; $QUIET_FIGS; $CHECKED"
