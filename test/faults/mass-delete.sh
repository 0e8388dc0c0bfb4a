#!/usr/bin/env bash
# Mass deletion: the 200 custom resources are deleted at once, right after a
# spec change to all of them, so that reconciles race the deletes. The
# garbage collector removes every child; no reconcile re-creates one (an
# apply that creates answers 201: the proxy sees every one), no error storm.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace mass-delete
start_replica a
apply_workload 1
wait_recovered 300
ok "the workload is Ready"

step "a spec change to all 200, then all 200 deleted at once, while the updates are under way"
t0=$(now_ms)
# kubectl sends the 200 changes in a few seconds; stencil, at its client
# rate limit (50 requests/s), takes longer to apply them: the deletes below
# meet a full queue.
apply_workload 2
fault_start=$(now_ms)
# One DELETE of each collection (kubectl delete would send 200 DELETEs one
# after the other).
sel=${WORKLOAD_SELECTOR/=/%3D}
k delete --raw "/apis/apps.example.com/v1beta1/namespaces/$NS/webapps?labelSelector=$sel" >/dev/null &
del1=$!
k delete --raw "/apis/cache.example.com/v1alpha1/namespaces/$NS/memcacheds?labelSelector=$sel" >/dev/null
wait "$del1" || fail "deleting the WebApps failed"
deleted=$(now_ms)
ok "deleted with two collection DELETEs ($(secs "$fault_start" "$deleted")s) after $(fig child "$(proxy_summary "$t0" "$fault_start")") child updates"

step "every child is garbage-collected; none is re-created"
no_children() {
  local left
  left=$(kn get deployments,services,webapps,memcacheds -l "app.kubernetes.io/managed-by=stencil" -o name 2>&1 | grep -c . || true)
  left=$((left + $(kn get webapps,memcacheds -o name | grep -c . || true)))
  [ "$left" = 0 ] || { echo "$left objects left"; return 1; }
}
wait_for 300 "the resources and their children to be gone" no_children
RECOVERED_MS=$(now_ms)
s=$(proxy_summary "$fault_start" "$RECOVERED_MS")
recreated=$(child_writes "$fault_start" | awk '$3 > 0 { n++; l = l $1 "/" $2 " " } END { print n + 0; if (n) print l > "/dev/stderr" }')
expect_eq "children re-created after the delete" 0 "$recreated"
failed=$(fig failed "$s")
((failed <= WORKLOAD)) || fail "error storm: $failed failed writes after the delete, want at most one per resource: $s"
errors=$(awk -v t="$(date -u -d "@$((fault_start / 1000))" +%H:%M:%S)" '/^E/ && $2 >= t' "${RLOG[a]}" | grep -c 'Reconcile failed' || true)
ok "all gone $(secs "$fault_start" "$RECOVERED_MS")s after the delete; 0 children re-created; after the delete began: $(fig child:apply "$s") child updates (to children still there), $(fig status "$s") status patches, $failed failed writes, $errors 'Reconcile failed' log lines"

quiet_window
figures "all gone $(secs "$fault_start" "$RECOVERED_MS")s after the delete; 0 children re-created; after the delete began: $(fig child:apply "$s") child updates, $(fig status "$s") status patches, $failed failed writes, $errors error lines; $QUIET_FIGS; $CHECKED"
