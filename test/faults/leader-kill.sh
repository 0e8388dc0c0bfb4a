#!/usr/bin/env bash
# Two replicas with --leader-elect; the leader is SIGKILLed in the middle of
# the workload. The standby takes over once the Lease expires: client-go's
# elector (15 s lease, 2 s retry period jittered up to 4.4 s) sees the last
# renewal at its next poll and takes the Lease at its first poll after
# expiry, so at most 15 + 2 x 4.4 = 23.8 s after that renewal. It writes nothing
# that the dead leader already wrote, and everything converges. The killed
# replica is restarted and stands by.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace leader-kill
# shellcheck disable=SC2046
start_replica a $(leader_flags)
lease_held_by() { [ "$(leader_tag)" = "$1" ]; }
wait_for 30 "replica a to hold the Lease" lease_held_by a
# shellcheck disable=SC2046
start_replica b $(leader_flags)
ok "a leads ($(lease_holder)), b stands by (/readyz 200)"

step "the leader gets SIGKILL in the middle of the workload"
t0=$(now_ms)
apply_workload 1 &
creates=$!
wait_for 120 "the leader to be creating children" writes_at_least child 60 a
fault_start=$(now_ms)
kill_replica a
wait "$creates" || fail "kubectl apply failed"
last_renew=$(proxy_writes 0 "$fault_start" a | awk '$4 == "leases" && $7 ~ /^2/ { t = $1 } END { print t }')
ok "a killed after $(fig child "$(proxy_summary "$t0" "$fault_start" a)") child writes; its last Lease renewal $(secs "$last_renew" "$fault_start")s before"

step "b takes over within the lease duration"
wait_for 60 "b to hold the Lease" lease_held_by b
acquired=$(proxy_writes "$fault_start" "" b | awk '$4 == "leases" && $7 ~ /^2/ && !found { print $1; found = 1 }')
b_wrote() { [ -n "$(first_write b "$fault_start")" ]; }
wait_for 30 "b to write" b_wrote
took_over=$(first_write b "$fault_start")
since_renew=$(secs "$last_renew" "$acquired")
awk -v s="$since_renew" 'BEGIN { exit !(s <= 23.8) }' ||
  fail "b acquired the Lease ${since_renew}s after a's last renewal; want at most 23.8 s (15 s lease + 2 polls of at most 4.4 s)"
ok "b acquired the Lease ${since_renew}s after a's last renewal, $(secs "$fault_start" "$acquired")s after the kill; its first write $(secs "$fault_start" "$took_over")s after the kill"

step "a restarts and stands by; everything converges"
a_restart=$(now_ms)
# shellcheck disable=SC2046
start_replica a $(leader_flags)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
ok "all $WORKLOAD Ready $(secs "$took_over" "$RECOVERED_MS")s after b's first write; since the kill: $during"

step "never two writers, nothing written twice"
a_after=$(proxy_writes "$a_restart" "" a | grep -vc ' leases ' || true)
expect_eq "writes by a since it restarted (as a standby), Lease aside" 0 "$a_after"
written=$(expect_written_once "$t0")
ok "$written"

QUIET_REPLICAS="a b" quiet_window
figures "takeover $(secs "$last_renew" "$acquired")s after the last renewal (bound 23.8 s), first write $(secs "$fault_start" "$took_over")s after the kill; recovered $(secs "$took_over" "$RECOVERED_MS")s later; since the kill $during; $written; $QUIET_FIGS; $CHECKED"
