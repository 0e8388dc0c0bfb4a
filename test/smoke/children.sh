#!/usr/bin/env bash
# Child kinds beyond Deployment and Service, opted into by the config's
# children list: the WebApp's ConfigMap is created from spec.config, a change
# of it rolls the Deployment (checksum annotation), and it is pruned when the
# spec no longer asks for it; a PodDisruptionBudget and a
# HorizontalPodAutoscaler (which owns the replicas) are created and counted
# in readiness.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace children
install_crds
start_stencil
apply_samples_ready webapp

step "the ConfigMap is created from spec.config, with the stencil labels and owner"
expect_eq "demo-config GREETING" hello "$(kn get configmap/demo-config -o jsonpath='{.data.GREETING}')"
expect_eq "demo-config owner" WebApp "$(kn get configmap/demo-config -o jsonpath='{.metadata.ownerReferences[0].kind}')"
expect_eq "demo-config managed-by" stencil "$(kn get configmap/demo-config -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')"
sum1=$(kn get deployment/demo -o jsonpath='{.spec.template.metadata.annotations.stencil\.dev/config-checksum}')
[ -n "$sum1" ] || fail "deployment/demo has no config checksum annotation"
ok "configmap/demo-config owned by webapp/demo; deployment/demo pod template checksum ${sum1:0:12}"

step "a change of spec.config updates the ConfigMap and rolls the Deployment"
gen1=$(kn get deployment/demo -o jsonpath='{.metadata.generation}')
kn patch webapp/demo --type merge -p '{"spec":{"config":{"GREETING":"bonjour"}}}' >/dev/null
updated() { [ "$(kn get configmap/demo-config -o jsonpath='{.data.GREETING}')" = bonjour ]; }
wait_for 30 "demo-config GREETING=bonjour" updated
rolled() { [ "$(kn get deployment/demo -o jsonpath='{.metadata.generation}')" -gt "$gen1" ]; }
wait_for 30 "deployment/demo to roll" rolled
sum2=$(kn get deployment/demo -o jsonpath='{.spec.template.metadata.annotations.stencil\.dev/config-checksum}')
[ "$sum2" != "$sum1" ] || fail "the checksum did not change"
kn wait webapp/demo --for=condition=Ready --timeout=90s >/dev/null
ok "GREETING=bonjour; deployment/demo generation $gen1 -> $(kn get deployment/demo -o jsonpath='{.metadata.generation}'), checksum ${sum2:0:12}; Ready"

step "the PodDisruptionBudget follows spec.minAvailable"
expect_eq "pdb/demo minAvailable" 1 "$(kn get pdb/demo -o jsonpath='{.spec.minAvailable}')"
healthy() { [ "$(kn get pdb/demo -o jsonpath='{.status.currentHealthy}')" -ge 1 ]; }
wait_for 60 "pdb/demo to see a healthy pod" healthy
ok "pdb/demo minAvailable 1, currentHealthy $(kn get pdb/demo -o jsonpath='{.status.currentHealthy}')"

step "a spec without config and minAvailable prunes the ConfigMap and the PDB"
kn patch webapp/demo --type json -p '[{"op":"remove","path":"/spec/config"},{"op":"remove","path":"/spec/minAvailable"}]' >/dev/null
wait_for 30 "configmap/demo-config to be pruned" gone configmap/demo-config
wait_for 30 "pdb/demo to be pruned" gone pdb/demo
kn get deployment/demo service/demo >/dev/null
kn wait webapp/demo --for=condition=Ready --timeout=90s >/dev/null
ok "configmap/demo-config and pdb/demo pruned; deployment/demo and service/demo kept; Ready"

step "an autoscaled WebApp gets an HPA that owns the replicas"
create_once kn apply -f "$smoke_root/crds/samples/webapp-autoscaled.yaml" >/dev/null
kn wait webapp/autoscaled --for=condition=Ready --timeout=90s >/dev/null
expect_eq "hpa/autoscaled maxReplicas" 3 "$(kn get hpa/autoscaled -o jsonpath='{.spec.maxReplicas}')"
managers=$(kn get deployment/autoscaled --show-managed-fields -o jsonpath='{range .metadata.managedFields[?(@.manager=="stencil")]}{.fieldsV1}{end}')
[[ "$managers" != *'"f:replicas"'* ]] || fail "stencil manages deployment/autoscaled spec.replicas, which the HPA owns"
ok "hpa/autoscaled (1..3) targets deployment/autoscaled; stencil does not set its replicas; Ready"
