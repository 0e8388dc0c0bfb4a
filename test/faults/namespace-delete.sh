#!/usr/bin/env bash
# A namespace deleted with custom resources in it, while stencil is busy
# with them: the API server refuses writes into a terminating namespace
# (NamespaceTerminating) and the namespace controller deletes everything in
# it. stencil ends those syncs quietly: no error storm, no retry loop against
# the namespace, nothing at all sent there once it is gone; the 200 resources
# of the other namespace it watches are not touched.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace namespace-delete
doomed="$NS-doomed"
new_namespace "$doomed"
# One stencil for both namespaces: the config lists them.
copy_config
sed -i "s|^    templates:|    namespaces: [$NS, $doomed]\n    templates:|" "$CONFIG_DIR/stencil.yaml"
FAULTS_CONFIG="$CONFIG_DIR/stencil.yaml"
FAULTS_SCOPE=""
start_replica a
apply_workload 1
# 50 more in the doomed namespace: 25 WebApps, 25 Memcacheds.
doomed_workload() {
  WORKLOAD=50 workload "$1" | sed "s/name: wa-/name: dw-/; s/name: mc-/name: dm-/"
}
doomed_workload 1 | k -n "$doomed" apply --server-side --field-manager=faults-author -f - >/dev/null
wait_recovered 300
"$FAULTCHECK" wait-ready --config "$FAULTS_CONFIG" --namespace "$doomed" --count 50 --timeout 120s >/dev/null ||
  fail "the doomed namespace's resources are not Ready"
ok "200 resources Ready in $NS, 50 in $doomed"

step "the 50 get a spec change, and their namespace is deleted while stencil works on them"
t0=$(now_ms)
doomed_workload 2 | k -n "$doomed" apply --server-side --field-manager=faults-author -f - >/dev/null
fault_start=$(now_ms)
k delete namespace "$doomed" --wait=false >/dev/null
ns_gone() {
  local out
  out=$(k get namespace "$doomed" -o name 2>&1) && { echo "$doomed still exists"; return 1; }
  [[ "$out" == *NotFound* ]] || { echo "$out"; return 1; }
}
wait_for 300 "namespace $doomed to be gone" ns_gone
RECOVERED_MS=$(now_ms)
ok "$doomed gone $(secs "$fault_start" "$RECOVERED_MS")s after the delete"

step "no error storm, no retry loop against the terminating namespace; the other namespace untouched"
in_doomed() { proxy_writes "$@" | awk -v ns="$doomed" '$5 == ns'; }
sent=$(in_doomed "$fault_start" "$RECOVERED_MS" | wc -l)
refused=$(in_doomed "$fault_start" "$RECOVERED_MS" | awk '$7 !~ /^2/' | wc -l)
# Each of the 50 may meet the terminating namespace once in a sync (an apply
# refused with NamespaceTerminating, or a status patch conflicting with the
# deletion) and once with an event of its last sync: 100 at most.
((refused <= 100)) || fail "error storm: $refused refused writes into $doomed, want at most 2 per resource"
# A write refused for the terminating namespace (403 NamespaceTerminating:
# the proxy talks with admin credentials, so no 403 means anything else) is
# never sent again for the same object. (A 409 conflict on a status patch is
# optimistic concurrency at work: the cache was behind a write.)
retried=$(in_doomed "$fault_start" "$RECOVERED_MS" | awk '$7 == 403 && $6 != "-" { n[$4 " " $6]++ } END { for (k in n) if (n[k] > 1) printf "%s refused %d times; ", k, n[k] }')
[ -z "$retried" ] || fail "retry loop against the terminating namespace: $retried"
from=$(date -u -d "@$((fault_start / 1000))" +%H:%M:%S)
errors=$(awk -v t="$from" '/^E/ && $2 >= t' "${RLOG[a]}" | grep -c "$doomed" || true)
((errors <= 5)) || fail "error storm: $errors error lines about $doomed in ${RLOG[a]}"
other=$(proxy_writes "$t0" "$RECOVERED_MS" | awk -v ns="$NS" '$5 == ns' | grep -vc ' leases ' || true)
expect_eq "writes into $NS during the deletion" 0 "$other"
terminating=$(in_doomed "$fault_start" "$RECOVERED_MS" | awk '$7 == 403' | wc -l)
ok "into $doomed after the delete: $sent writes, $refused refused ($terminating for the terminating namespace, none twice for one object), $errors error lines; 0 writes into $NS"

QUIET_REPLICAS=a quiet_window --write-ns "$doomed"
after=$(in_doomed "$RECOVERED_MS" | wc -l)
expect_eq "writes into $doomed once gone" 0 "$after"
figures "the doomed namespace gone $(secs "$fault_start" "$RECOVERED_MS")s after the delete; meanwhile $sent writes into it ($refused refused, $terminating of them NamespaceTerminating, none twice), $errors error lines, 0 writes into the other namespace; 0 once gone; $QUIET_FIGS; $CHECKED"
