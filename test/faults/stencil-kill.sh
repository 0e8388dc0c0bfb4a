#!/usr/bin/env bash
# stencil SIGKILLed in the middle of a burst of creates and spec changes, and
# restarted (as its Deployment's kubelet would): the new process takes the
# state from the cluster, finishes what was cut off, and writes no child
# twice: every child created once, a child whose resource's spec changed
# updated at most once.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace stencil-kill
start_replica a

step "a burst of creates, then spec changes to a quarter of the resources; stencil gets SIGKILL mid-burst"
t0=$(now_ms)
apply_workload 1 &
creates=$!
wait_for 120 "stencil to be creating children" writes_at_least child 30
# New image (and, for WebApps, port) for wa-000..wa-049 and mc-000..mc-049,
# while the creates go on.
apply_workload 2 $((WORKLOAD / 4)) &
changes=$!
changed='^(wa|mc)-0([0-4][0-9])$'
wait_for 120 "stencil to be in the middle of the burst" writes_at_least child $((WORKLOAD * 3 / 4))
fault_start=$(now_ms)
kill_replica a
wait "$creates" || fail "kubectl apply (creates) failed"
wait "$changes" || fail "kubectl apply (spec changes) failed"
before=$(proxy_summary "$t0" "$fault_start")
ok "killed (exit ${RRC[a]}) after $(fig child "$before") child writes and $(fig status "$before") status patches"

step "restarted at once: it converges from the cluster's state"
start_replica a
fault_end=$(now_ms)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
ok "ready again $(secs "$fault_start" "$fault_end")s after the kill; all $WORKLOAD Ready $(secs "$fault_end" "$RECOVERED_MS")s later; since the kill: $during"

step "no child written twice across the two processes"
written=$(expect_written_once "$t0" "$changed")
ok "$written"

quiet_window
figures "recovered $(secs "$fault_end" "$RECOVERED_MS")s after the restart (restart took $(secs "$fault_start" "$fault_end")s); since the kill $during; $written; $QUIET_FIGS; $CHECKED"
