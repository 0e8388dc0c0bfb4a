#!/usr/bin/env bash
# Two replicas with --leader-elect; the leader is paused (SIGSTOP) in the
# middle of a burst, past its Lease, while the standby takes over and works;
# then it is resumed (SIGCONT). The old leader must write nothing once
# resumed (it lost the Lease: its in-flight work is cancelled) and exit 1 to
# restart clean; it is restarted and stands by. At no time do two replicas
# write: every write of the old leader precedes the new leader's first, the
# resumed leader writes nothing at all, not even the Lease (client-go's
# ReleaseOnCancel once overwrote the new leader's Lease here, issue 20), and
# no two replicas write within a second of each other through the end.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace leader-pause
# shellcheck disable=SC2046
start_replica a $(leader_flags)
lease_held_by() { [ "$(leader_tag)" = "$1" ]; }
wait_for 30 "replica a to hold the Lease" lease_held_by a
# shellcheck disable=SC2046
start_replica b $(leader_flags)
ok "a leads ($(lease_holder)), b stands by"

step "a burst of creates and spec changes; the leader is paused in the middle of it"
t0=$(now_ms)
apply_workload 1 &
creates=$!
wait_for 120 "the leader to be creating children" writes_at_least child 40 a
apply_workload 2 $((WORKLOAD / 4)) &
changes=$!
changed='^(wa|mc)-0([0-4][0-9])$'
wait_for 120 "the leader to be in the middle of the burst" writes_at_least child $((WORKLOAD / 2)) a
fault_start=$(now_ms)
signal_replica a STOP
wait "$creates" || fail "kubectl apply (creates) failed"
wait "$changes" || fail "kubectl apply (spec changes) failed"
ok "a paused after $(fig child "$(proxy_summary "$t0" "$fault_start" a)") child writes"

step "b takes over and works while a is paused"
wait_for 60 "b to hold the Lease" lease_held_by b
acquired=$(proxy_writes "$fault_start" "" b | awk '$4 == "leases" && $7 ~ /^2/ && !found { print $1; found = 1 }')
wait_for 60 "b to have written 20 children" writes_at_least child 20 b
ok "b acquired the Lease $(secs "$fault_start" "$acquired")s after a was paused"

step "a resumed: it writes nothing, notices it lost the Lease, exits 1"
resumed=$(now_ms)
signal_replica a CONT
wait_replica_exit a 30
exited=$(now_ms)
expect_eq "a's exit status" 1 "${RRC[a]}"
grep -q 'lost the leader-election Lease' "${RLOG[a]}" || fail "no 'lost the leader-election Lease' in ${RLOG[a]}"
after_resume=$(proxy_writes "$resumed" "" a)
[ -z "$after_resume" ] || fail "a wrote after it was resumed (the Lease included): $(head -n 10 <<<"$after_resume")"
expect_eq "the Lease's last writer after a exited" b "$(leader_tag)"
[ -n "$(lease_holder)" ] || fail "the Lease has no holder after a exited: it was released"
ok "a exited 1 $(secs "$resumed" "$exited")s after SIGCONT, with no write, the Lease included; b still holds it ($(lease_holder))"

step "never two writers at once"
a_last=$(last_write a "$t0")
b_first=$(first_write b "$t0")
((a_last < b_first)) || fail "a wrote at $a_last, after b's first write at $b_first"
ok "a's last write $(secs "$a_last" "$b_first")s before b's first"

step "a restarts and stands by; everything converges"
a_restart=$(now_ms)
# shellcheck disable=SC2046
start_replica a $(leader_flags)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
a_after=$(proxy_writes "$a_restart" "" a | wc -l)
expect_eq "writes by a since it restarted (as a standby), the Lease included" 0 "$a_after"
written=$(expect_written_once "$t0" "$changed")
ok "all $WORKLOAD Ready $(secs "$resumed" "$RECOVERED_MS")s after a was resumed; since the pause: $during; $written"

QUIET_REPLICAS="a b" quiet_window
step "never two writers within a second, from the burst to the end"
apart=$(writers_apart "$t0")
expect_eq "the Lease's holder at the end" b "$(leader_tag)"
ok "the closest writes of two replicas were ${apart} ms apart"
figures "closest writes of two replicas ${apart} ms apart; b leads $(secs "$fault_start" "$acquired")s after the pause; a resumed: 0 writes, exit 1 in $(secs "$resumed" "$exited")s; a's last write $(secs "$a_last" "$b_first")s before b's first; since the pause $during; $written; $QUIET_FIGS; $CHECKED"
