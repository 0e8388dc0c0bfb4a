#!/usr/bin/env bash
# A WebApp's life as a user sees it with kubectl: created, its Deployment and
# Service appear with stencil's ownerReference and labels, it becomes
# Ready=True with its status filled in and events recorded, and deleting it
# makes the garbage collector remove both children.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace lifecycle
install_crds
start_stencil

step "a new WebApp gets a Deployment and a Service owned by it"
create_once kn apply -f "$smoke_root/crds/samples/webapp.yaml" >/dev/null
uid=$(kn get webapp/demo -o jsonpath='{.metadata.uid}')
for child in deployment/demo service/demo; do
  wait_for 30 "$child to be created" kn get "$child"
  expect_eq "$child controller owner" "WebApp/demo/$uid/true" \
    "$(kn get "$child" -o jsonpath='{range .metadata.ownerReferences[?(@.controller==true)]}{.kind}/{.name}/{.uid}/{.controller}{end}')"
  expect_eq "$child managed-by label" stencil \
    "$(kn get "$child" -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')"
  expect_eq "$child owner-uid label" "$uid" \
    "$(kn get "$child" -o jsonpath='{.metadata.labels.stencil\.dev/owner-uid}')"
  managers=$(kn get "$child" --show-managed-fields -o jsonpath='{range .metadata.managedFields[?(@.operation=="Apply")]}{.manager}{" "}{end}')
  expect_eq "$child apply field managers" "stencil " "$managers"
done
ok "deployment/demo and service/demo: controller ownerReference to webapp/demo ($uid), both labels, applied by field manager stencil"

step "the WebApp becomes Ready=True with its status filled in"
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
expect_eq "Ready reason" "True AllChildrenReady" "$(ready_reason webapp/demo)"
gen=$(kn get webapp/demo -o jsonpath='{.metadata.generation}')
expect_eq "status.observedGeneration" "$gen" "$(kn get webapp/demo -o jsonpath='{.status.observedGeneration}')"
expect_eq "Ready observedGeneration" "$gen" "$(condition webapp/demo Ready observedGeneration)"
expect_eq "phase replicas/readyReplicas" "Ready 2/2" \
  "$(kn get webapp/demo -o jsonpath='{.status.phase} {.status.replicas}/{.status.readyReplicas}')"
expect_eq "status.url (statusTemplate)" "http://demo.$NS.svc:8080" "$(kn get webapp/demo -o jsonpath='{.status.url}')"
expect_eq "Reconciling and Stalled once Ready" "" "$(condition webapp/demo Reconciling status)$(condition webapp/demo Stalled status)"
row=$(kn get webapp/demo --no-headers)
[[ "$row" =~ ^demo[[:space:]]+True[[:space:]]+AllChildrenReady[[:space:]]+2[[:space:]] ]] ||
  fail "kubectl get row '$row', want demo True AllChildrenReady 2 ..."
ok "Ready=True AllChildrenReady at generation $gen, neither Reconciling nor Stalled, phase Ready, 2/2 replicas; kubectl get shows: $row"

step "one event on the WebApp records every create of the sync"
created_events() {
  local n
  n=$(kn get events --field-selector involvedObject.kind=WebApp,involvedObject.name=demo,reason=Created -o name | wc -l)
  ((n == 1)) || { echo "$n Created events"; return 1; }
}
wait_for 30 "one Created event" created_events
msgs=$(kn get events --field-selector involvedObject.name=demo,reason=Created -o jsonpath='{range .items[*]}{.type} {.message} (count {.count}); {end}')
[[ "$msgs" == *"Deployment/demo"* && "$msgs" == *"Service/demo"* && "$msgs" == *"(count 1)"* ]] || fail "Created events are '$msgs'"
ok "events: $msgs"

step "deleting the WebApp garbage-collects its children"
kn delete webapp/demo --wait=true >/dev/null
# On a plane started moments ago the garbage collector learns of the WebApp
# resource at its next discovery pass (every 30s), so allow for that.
wait_for 120 "deployment/demo to be garbage-collected" gone deployment/demo
wait_for 120 "service/demo to be garbage-collected" gone service/demo
ok "deployment/demo and service/demo are gone after webapp/demo was deleted"
