#!/usr/bin/env bash
# A child the templates no longer render is deleted: the controller is
# restarted with the Service template dropped from the config, and the
# Service goes while the Deployment stays, untouched.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace prune
install_crds
start_stencil

apply_samples_ready webapp
kn get service/demo >/dev/null
rv=$(kn get deployment/demo -o jsonpath='{.metadata.generation}')

step "restart with a config that no longer lists webapp/service.yaml.tmpl"
stop_stencil
expect_eq "exit status of the first controller" 0 "$STENCIL_RC"
copy_config
sed -i '/service.yaml.tmpl/d' "$CONFIG_DIR/stencil.yaml"
start_stencil --config "$CONFIG_DIR/stencil.yaml"
wait_for 30 "service/demo to be pruned" gone service/demo
wait_for 30 "a Pruned event" has_event Pruned
kn get deployment/demo >/dev/null
expect_eq "deployment/demo generation" "$rv" "$(kn get deployment/demo -o jsonpath='{.metadata.generation}')"
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "service/demo pruned ($(kn get events --field-selector reason=Pruned -o jsonpath='{.items[0].message}')), deployment/demo kept at generation $rv, Ready=True"

