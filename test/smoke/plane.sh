#!/usr/bin/env bash
# The local control plane is a real one: the scheduler places pods on a kwok
# node, kwok makes them Ready, the Deployment and ReplicaSet controllers
# report it, and the garbage collector deletes dependents of a deleted owner.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace plane

step "a Deployment with 2 replicas reaches readyReplicas 2 on a kwok node"
create_once kn apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {type: kwok}
      containers:
      - name: web
        image: registry.invalid/web:1
EOF
kn wait deployment/web --for=jsonpath='{.status.readyReplicas}'=2 --timeout=60s >/dev/null
nodes=$(kn get pods -l app=web -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
[[ "$nodes" == kwok-node-* ]] || fail "pods are on nodes '$nodes', want kwok-node-*"
ips=$(kn get pods -l app=web -o jsonpath='{range .items[*]}{.status.podIP}{" "}{end}')
expect_eq "pods with an IP" 2 "$(wc -w <<<"$ips")"
ok "2 of 2 replicas ready on $nodes, pod IPs $ips"

step "the garbage collector deletes a ConfigMap whose owner is deleted"
create_once kn create configmap owner --from-literal=role=owner >/dev/null
uid=$(kn get configmap owner -o jsonpath='{.metadata.uid}')
create_once kn apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: $uid
data:
  role: dependent
EOF
kn delete configmap owner >/dev/null
dependent_gone() {
  local out
  out=$(kn get configmap dependent -o name 2>&1) && return 1
  [[ "$out" == *NotFound* ]]
}
wait_for 60 "configmap/dependent to be garbage-collected" dependent_gone
ok "configmap/dependent was deleted after its owner"
