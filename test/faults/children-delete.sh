#!/usr/bin/env bash
# Hand-deleted children in bulk: every Deployment stencil manages in the
# namespace deleted with one kubectl command (by its label). Each is
# re-created once: one apply that creates (201) per Deployment, no second
# create, no update, and nothing written to the Services.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace children-delete
start_replica a
apply_workload 1
wait_recovered 300
ok "the workload is Ready"

step "kubectl delete deploy -l app.kubernetes.io/managed-by=stencil"
fault_start=$(now_ms)
deleted=$(kn delete deployments -l app.kubernetes.io/managed-by=stencil --wait=false -o name | grep -c . || true)
fault_end=$(now_ms)
expect_eq "Deployments deleted" "$WORKLOAD" "$deleted"
ok "$deleted Deployments deleted in $(secs "$fault_start" "$fault_end")s"

step "all re-created, once each"
# The resources' statuses still say Ready from before the delete until
# stencil has written for them: wait for every Deployment to be back and
# available first, then for the statuses (else a status still Ready from
# before, read a moment before stencil reports a re-created Deployment as
# Progressing, passes for recovery).
deployments_back() {
  local n
  n=$(kn get deployments -l app.kubernetes.io/managed-by=stencil \
    -o jsonpath='{range .items[?(@.status.availableReplicas>=1)]}{.metadata.name}{"\n"}{end}' | grep -c . || true)
  [ "$n" -ge "$WORKLOAD" ] || { echo "$n of $WORKLOAD available"; return 1; }
}
wait_for 300 "all $WORKLOAD Deployments back and available" deployments_back
wait_recovered 300
during=$(write_figs "$fault_start" "$RECOVERED_MS")
written=$(child_writes "$fault_start" | awk -v want="$WORKLOAD" '
  $1 != "deployments" { bad = bad $1 "/" $2 " written; "; next }
  { n++; if ($3 != 1) bad = bad "deployments/" $2 " created " $3 " times; "; if ($4 > 0) bad = bad "deployments/" $2 " updated; " }
  END { if (n != want) bad = bad n " Deployments written, want " want "; "
    if (bad != "") { print bad; exit 1 }
    printf "%d Deployments re-created once each, no update, no other child written\n", n }') || fail "$written"
ok "all $WORKLOAD Ready $(secs "$fault_end" "$RECOVERED_MS")s after the delete ended; $written; since the delete: $during"

quiet_window
figures "recovered $(secs "$fault_end" "$RECOVERED_MS")s after the delete ended; $written; since the delete $during; $QUIET_FIGS; $CHECKED"
