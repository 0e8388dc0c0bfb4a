#!/usr/bin/env bash
# A spec change reaches the children: replicas and image on the Deployment,
# port on the Deployment's containerPort and on the Service, and the status
# follows the new generation.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace update
install_crds
start_stencil

apply_samples_ready webapp

step "replicas 2 -> 3, image pause:3.10 -> pause:3.9, port 8080 -> 9090"
kn patch webapp/demo --type=merge -p '{"spec":{"replicas":3,"image":"registry.k8s.io/pause:3.9","port":9090}}' >/dev/null
gen=$(kn get webapp/demo -o jsonpath='{.metadata.generation}')
deployment_updated() {
  local got
  got=$(kn get deployment/demo -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}')
  [ "$got" = "3 registry.k8s.io/pause:3.9 9090" ] || { echo "deployment/demo has '$got'"; return 1; }
}
wait_for 30 "deployment/demo to follow the spec" deployment_updated
service_updated() {
  local got
  got=$(kn get service/demo -o jsonpath='{.spec.ports[0].port}')
  [ "$got" = 9090 ] || { echo "service/demo port is '$got'"; return 1; }
}
wait_for 30 "service/demo to follow the spec" service_updated
ok "deployment/demo: 3 replicas of registry.k8s.io/pause:3.9 on 9090; service/demo: port 9090"

step "the status catches up with generation $gen"
caught_up() {
  local got
  got=$(kn get webapp/demo -o jsonpath='{.status.observedGeneration} {.status.readyReplicas} {.status.url}')
  [ "$got" = "$gen 3 http://demo.$NS.svc:9090" ] || { echo "status has '$got'"; return 1; }
}
wait_for 60 "status to show generation $gen with 3 ready replicas" caught_up
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
expect_eq "Ready observedGeneration" "$gen" "$(condition webapp/demo Ready observedGeneration)"
wait_for 30 "an Updated event" has_event Updated
ok "observedGeneration $gen, 3 ready replicas, url on 9090, Ready=True, Updated event recorded"
