#!/usr/bin/env bash
# SIGTERM to the leader (two replicas, --leader-elect) in the middle of a
# burst: it stops taking work, lets its in-flight reconciles finish (no write
# cut short), writes their events, releases the Lease and exits 0; the
# standby takes over at once and finishes. Every child is announced by
# exactly one Created event: none was lost in the shutdown.
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
grep -q 'Released the Lease' "${RLOG[a]}" || fail "a did not release the Lease: $(grep -i 'lease' "${RLOG[a]}" | tail -n 3)"
acquired=$(proxy_writes "$fault_start" "" b | awk '$4 == "leases" && $7 ~ /^2/ && !found { print $1; found = 1 }')
# Released, the Lease is b's at its next retry (2 s, jittered up to 4.4 s),
# not after the 15 s it would take to expire.
((acquired - exited <= 5000)) || fail "b acquired the Lease $(secs "$exited" "$acquired")s after a exited; a release makes it at b's next retry (at most 4.4 s)"
took_over=$(first_write b "$fault_start")
b_first="none needed"
[ -z "$took_over" ] || b_first="$(secs "$exited" "$took_over")s after a exited"
a_restart=$(now_ms)
# shellcheck disable=SC2046
start_replica a $(leader_flags)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
ok "b acquired the released Lease $(secs "$exited" "$acquired")s after a exited; b's first write: $b_first; all $WORKLOAD Ready $(secs "$exited" "$RECOVERED_MS")s after; since the signal: $during"

step "nothing written twice, no event lost"
a_after=$(proxy_writes "$a_restart" "" a | grep -vc ' leases ' || true)
expect_eq "writes by a since it restarted (as a standby), Lease aside" 0 "$a_after"
written=$(expect_written_once "$t0")
# One event per sync names every child it created ("Created Deployment/x,
# Service/x"); an event recorded twice shows as a count of 2.
announced() {
  kn get events --field-selector reason=Created -o jsonpath='{range .items[*]}{.count} {.message}{"\n"}{end}' |
    awk '{ n = $1; msg = $0; sub(/^[0-9]+ Created /, "", msg); m = split(msg, names, ", ")
      for (i = 1; i <= m; i++) { seen[names[i]] += n } }
      END { for (c in seen) { distinct++; total += seen[c] } printf "%d %d\n", distinct, total }'
}
created_events() {
  local got
  got=$(announced)
  [ "$got" = "$((WORKLOAD * 3 / 2)) $((WORKLOAD * 3 / 2))" ] || { echo "children announced (distinct, in all): $got"; return 1; }
}
wait_for 30 "every child announced once in a Created event" created_events
ok "$written; $((WORKLOAD * 3 / 2)) children announced by Created events, each once"

QUIET_REPLICAS="a b" quiet_window
figures "exit 0 $(secs "$fault_start" "$exited")s after SIGTERM ($queued), 0 writes cut short, $((WORKLOAD * 3 / 2))/$((WORKLOAD * 3 / 2)) children announced by Created events; b acquired the Lease $(secs "$exited" "$acquired")s after; b's first write: $b_first; recovered $(secs "$exited" "$RECOVERED_MS")s after the exit; since the signal $during; $QUIET_FIGS; $CHECKED"
