#!/usr/bin/env bash
# A watch that falls behind: stencil is paused (SIGSTOP, as a long GC pause
# or a partition would) while resources change, children are deleted, the
# API server restarts (its watch cache starts again from etcd's current
# revision) and etcd's history is compacted to that revision. Resumed,
# stencil's watches ask to go on from resourceVersions nobody holds any more
# ("too old resource version", 410 Gone): its informers list again and it
# converges, in the same process. (Compaction alone does not reach a client
# behind the API server's watch cache: the cache keeps its own window of
# history, at least 75 s, which is why the API server restarts too.)
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace watch-relist
start_replica a
pid=${RPID[a]}
apply_workload 1
wait_recovered 300
ok "the workload is Ready"

step "stencil paused; meanwhile specs change, children are deleted, the API server restarts, etcd is compacted"
fault_start=$(now_ms)
signal_replica a STOP
apply_workload 2 $((WORKLOAD / 8))
changed='^(wa|mc)-0(0[0-9]|1[0-9]|2[0-4])$'
kn delete deployments mc-090 mc-091 mc-092 mc-093 mc-094 wa-095 wa-096 wa-097 wa-098 wa-099 >/dev/null
kn delete services wa-090 wa-091 wa-092 wa-093 wa-094 >/dev/null
# SIGKILL: a graceful stop would wait (60 s and more) for the answers the
# paused stencil does not read.
stop_component kube-apiserver KILL
restart_component kube-apiserver
rev=$(etcd_revision)
etcd_compact "$rev"
resumed=$(now_ms)
signal_replica a CONT
ok "resumed after $(secs "$fault_start" "$resumed")s; etcd compacted at revision $rev"

step "stencil lists again and converges, same process"
wait_recovered 300
s=$(proxy_summary "$resumed" "$RECOVERED_MS")
relists=$(($(fig watchlist "$s") + $(fig list "$s")))
((relists >= 4)) || fail "stencil did not list again after it was resumed: $s"
expect_eq "stencil's pid" "$pid" "${RPID[a]}"
replica_alive a || fail "stencil exited"
during=$(write_figs "$resumed" "$RECOVERED_MS")
ok "all $WORKLOAD Ready $(secs "$resumed" "$RECOVERED_MS")s after it was resumed, same pid $pid; $relists lists (webapps $(($(fig watchlist:webapps "$s") + $(fig list:webapps "$s"))), memcacheds $(($(fig watchlist:memcacheds "$s") + $(fig list:memcacheds "$s"))), deployments $(($(fig watchlist:deployments "$s") + $(fig list:deployments "$s"))), services $(($(fig watchlist:services "$s") + $(fig list:services "$s")))); since: $during"

step "the 15 deleted children re-created once each, the changed ones updated at most once, nothing else written"
deleted='^(deployments (mc-09[0-4]|wa-09[5-9])|services wa-09[0-4])$'
written=$(child_writes "$resumed" | awk -v deleted="$deleted" -v changed="$changed" '
  { k = $1 " " $2 }
  k ~ deleted { if ($3 + $5 < 1 || $3 > 1) bad = bad k " created " $3 " times; "; re++; next }
  $3 > 0 { bad = bad k " created, never deleted; " }
  $2 ~ changed { if ($4 > 1) bad = bad k " updated " $4 " times; "; up += $4; next }
  $4 > 0 { bad = bad k " (spec unchanged) updated; " }
  END { if (re != 15) bad = bad re " deleted children re-created, want 15; "
    if (bad != "") { print bad; exit 1 }
    printf "15 deleted children re-created once each, %d children of changed resources updated once, nothing else written\n", up }') ||
  fail "$written"
ok "$written"

quiet_window
figures "recovered $(secs "$resumed" "$RECOVERED_MS")s after the resume, same process, $relists relists; since the resume $during; $written; $QUIET_FIGS; $CHECKED"
