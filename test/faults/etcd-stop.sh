#!/usr/bin/env bash
# etcd stopped (SIGTERM) for 30 s in the middle of the workload, then
# started again on the same data: the API server stays up but cannot read or
# write, stencil's requests fail or hang and its watches stall. Everything
# converges once etcd is back, without a restart of stencil, each child
# written once.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace etcd-stop
start_replica a

step "the workload is being created; etcd is stopped"
t0=$(now_ms)
apply_workload 1 2>/dev/null &
apply_pid=$!
wait_for 120 "stencil to be creating children" writes_at_least child 40
fault_start=$(now_ms)
stop_component etcd TERM
ok "etcd stopped at $(fig child "$(proxy_summary "$t0")") child writes"

step "30 s without etcd, then it starts again"
# The outage itself: a fixed time, not a wait for something.
sleep 30
kill -0 "${RPID[a]}" || fail "stencil exited during the outage"
failed_during=$(fig failed "$(proxy_summary "$fault_start")")
stop_apply "$apply_pid"
restart_component etcd
fault_end=$(now_ms)
ok "API ready again $(secs "$fault_start" "$fault_end")s after etcd stopped; stencil alive (pid ${RPID[a]}), $failed_during failed requests meanwhile"

step "the author re-applies; everything converges"
apply_workload 1
applied_ms=$(now_ms)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
last=$(last_child_write "$fault_end" "$RECOVERED_MS")
children_done="+$(secs "$fault_end" "${last:-$fault_end}")s"
ok "all $WORKLOAD Ready $(secs "$fault_end" "$RECOVERED_MS")s after etcd was back (the re-apply took $(secs "$fault_end" "$applied_ms")s, the last child write came at ${children_done}); during fault+recovery: $during"

step "each child written once"
written=$(expect_written_once "$t0")
ok "$written"

quiet_window
figures "recovered +$(secs "$fault_end" "$RECOVERED_MS")s after etcd was back (down $(secs "$fault_start" "$fault_end")s, last child write ${children_done}); during fault+recovery $during; $written; $QUIET_FIGS; $CHECKED"
