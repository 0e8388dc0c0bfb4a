#!/usr/bin/env bash
# stencil.dev/paused: "true" stops every write for a resource: the Ready
# condition says Paused, a spec change does not reach the children; removing
# the annotation resumes and the change goes through.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace pause
install_crds
start_stencil

apply_samples_ready webapp

step "pausing sets Ready=False Paused and keeps the rest of the status"
kn annotate webapp/demo stencil.dev/paused=true >/dev/null
wait_for 30 "Ready=False Paused" expect_ready_reason webapp/demo "False Paused"
expect_eq "phase and readyReplicas while paused" "Ready 2" "$(kn get webapp/demo -o jsonpath='{.status.phase} {.status.readyReplicas}')"
expect_eq "Reconciling and Stalled while paused" "" "$(condition webapp/demo Reconciling status)$(condition webapp/demo Stalled status)"
ok "Ready=False Paused: $(condition webapp/demo Ready message)"

step "a spec change while paused does not reach the Deployment"
dep_gen=$(kn get deployment/demo -o jsonpath='{.metadata.generation}')
kn patch webapp/demo --type=merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
gen=$(kn get webapp/demo -o jsonpath='{.metadata.generation}')
# The Paused condition carries the generation it was computed for: once it
# shows the new one, stencil has seen the change and chosen not to write.
kn wait webapp/demo --for=jsonpath="{.status.conditions[?(@.type==\"Ready\")].observedGeneration}=$gen" --timeout=30s >/dev/null
expect_eq "deployment/demo image" registry.k8s.io/pause:3.10 "$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].image}')"
expect_eq "deployment/demo generation" "$dep_gen" "$(kn get deployment/demo -o jsonpath='{.metadata.generation}')"
ok "generation $gen seen while paused; deployment/demo still pause:3.10 at generation $dep_gen"

step "removing the annotation resumes"
kn annotate webapp/demo stencil.dev/paused- >/dev/null
image_updated() {
  local got
  got=$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].image}')
  [ "$got" = registry.k8s.io/pause:3.9 ] || { echo "image is '$got'"; return 1; }
}
wait_for 30 "the image change to reach deployment/demo" image_updated
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
expect_eq "Ready" "True AllChildrenReady" "$(ready_reason webapp/demo)"
ok "deployment/demo now runs pause:3.9; Ready=True AllChildrenReady"
