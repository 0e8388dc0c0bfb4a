#!/usr/bin/env bash
# An existing object of a child's name that the WebApp does not control is
# never adopted or overwritten: the WebApp reports OwnershipConflict with a
# Warning event, the object is left as it was, and once its owner removes it
# stencil creates its own.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace conflict
install_crds
# A long resync: recovery below must come from the conflict recheck (30s).
start_stencil --resync 10m

step "a Service named demo exists before the WebApp demo"
create_once kn create service clusterip demo --tcp=80:80 >/dev/null
rv=$(kn get service/demo -o jsonpath='{.metadata.resourceVersion}')
create_once kn apply -f "$smoke_root/crds/samples/webapp.yaml" >/dev/null
wait_for 30 "Ready=False OwnershipConflict" expect_ready_reason webapp/demo "False OwnershipConflict"
msg=$(condition webapp/demo Ready message)
[[ "$msg" == *Service/demo* ]] || fail "condition message '$msg' does not name Service/demo"
wait_for 30 "a Warning OwnershipConflict event" has_event OwnershipConflict
expect_eq "event type" Warning "$(kn get events --field-selector reason=OwnershipConflict -o jsonpath='{.items[0].type}')"
ok "Ready=False OwnershipConflict: $msg; Warning event recorded"

step "the foreign Service is untouched"
expect_eq "service/demo resourceVersion" "$rv" "$(kn get service/demo -o jsonpath='{.metadata.resourceVersion}')"
expect_eq "service/demo ownerReferences" "" "$(kn get service/demo -o jsonpath='{.metadata.ownerReferences}')"
expect_eq "service/demo managed-by label" "" "$(kn get service/demo -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')"
kn get deployment/demo >/dev/null
ok "service/demo still at resourceVersion $rv with no owner; deployment/demo (no conflict) was created"

step "once the foreign Service is deleted, stencil creates its own"
kn delete service/demo --wait=true >/dev/null
owned_service() {
  local got
  got=$(kn get service/demo -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}' 2>&1)
  [ "$got" = WebApp/demo ] || { echo "service/demo owner: $got"; return 1; }
}
# No watch sees the foreign Service go (it has no stencil label): the
# recheck of resources in conflict, every 30s, finds the name free.
wait_for 60 "service/demo owned by webapp/demo" owned_service
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "service/demo now owned by webapp/demo; Ready=True"
