#!/usr/bin/env bash
# kube-apiserver SIGKILLed while the workload is being created, started
# again 20 s later: stencil rides out the outage (its requests fail, its
# watches break), the author re-applies what the outage cut off, and
# everything converges without a restart of stencil, writing nothing twice.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace apiserver-kill
start_replica a

step "the workload is being created; kube-apiserver gets SIGKILL"
t0=$(now_ms)
apply_workload 1 2>/dev/null &
apply_pid=$!
wait_for 120 "stencil to be creating children" writes_at_least child 40
fault_start=$(now_ms)
stop_component kube-apiserver KILL
before=$(proxy_summary "$t0" "$fault_start")
ok "killed at $(fig child "$before") child writes"

step "20 s without an API server, then it starts again"
# The outage itself: a fixed time, not a wait for something.
sleep 20
pid_of kube-apiserver >/dev/null && fail "kube-apiserver is running again by itself"
kill -0 "${RPID[a]}" || fail "stencil exited during the outage"
failed_during=$(fig failed "$(proxy_summary "$fault_start")")
stop_apply "$apply_pid"
restart_component kube-apiserver
fault_end=$(now_ms)
ok "kube-apiserver ready $(secs "$fault_start" "$fault_end")s after the kill; stencil alive (pid ${RPID[a]}), $failed_during failed requests meanwhile"

step "the author re-applies; everything converges"
apply_workload 1
applied_ms=$(now_ms)
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
last=$(last_child_write "$fault_end" "$RECOVERED_MS")
children_done="+$(secs "$fault_end" "${last:-$fault_end}")s"
ok "all $WORKLOAD Ready $(secs "$fault_end" "$RECOVERED_MS")s after the API server was back (the re-apply took $(secs "$fault_end" "$applied_ms")s, the last child write came at ${children_done}); during fault+recovery: $during"

step "each child written once"
written=$(expect_written_once "$t0")
ok "$written"

quiet_window
figures "recovered +$(secs "$fault_end" "$RECOVERED_MS")s after the API server was back (down $(secs "$fault_start" "$fault_end")s, last child write ${children_done}); during fault+recovery $during; $written; $QUIET_FIGS; $CHECKED"
