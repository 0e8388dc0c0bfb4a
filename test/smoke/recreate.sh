#!/usr/bin/env bash
# A child deleted by hand is recreated, with a new UID and the same owner.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace recreate
install_crds
start_stencil

apply_samples_ready webapp

for child in service/demo deployment/demo; do
  step "$child deleted by hand comes back"
  old=$(kn get "$child" -o jsonpath='{.metadata.uid}')
  kn delete "$child" --wait=true >/dev/null
  recreated() {
    local uid
    uid=$(kn get "$child" -o jsonpath='{.metadata.uid}' 2>&1) || { echo "$uid"; return 1; }
    if [ -z "$uid" ] || [ "$uid" = "$old" ]; then echo "$child has uid '$uid'"; return 1; fi
  }
  wait_for 30 "$child to be recreated" recreated
  owner=$(kn get "$child" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')
  expect_eq "$child owner" WebApp/demo "$owner"
  ok "$child recreated (uid $old -> $(kn get "$child" -o jsonpath='{.metadata.uid}')), owned by $owner"
done

kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "webapp/demo is Ready=True again"
