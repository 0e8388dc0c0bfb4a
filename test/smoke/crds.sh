#!/usr/bin/env bash
# The example CRDs guard their users: defaults, ranges, required fields and a
# CEL rule across fields are enforced by the API server; short names and
# printer columns make kubectl get useful.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace crds
install_crds

# rejected NAME YAML-SPEC WANT applies a WebApp with that spec and expects
# the API server to refuse it with a message containing WANT.
rejected() {
  local out
  if out=$(kn apply --dry-run=server -f - 2>&1 <<YAML
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: $1
spec: $2
YAML
  ); then
    fail "WebApp with spec $2 was accepted"
  fi
  [[ "$out" == *"$3"* ]] || fail "WebApp with spec $2: error '$out' lacks '$3'"
  ok "spec $2 rejected: ...$3..."
}

step "invalid specs are rejected by the API server"
rejected no-image '{"replicas": 1}' 'spec.image: Required value'
rejected too-many '{"image": "x", "replicas": 101}' 'spec.replicas: Invalid value'
rejected bad-port '{"image": "x", "port": 70000}' 'spec.port: Invalid value'
rejected bad-type '{"image": "x", "serviceType": "ExternalName"}' 'spec.serviceType: Unsupported value'
rejected cel '{"image": "x", "nodePort": 30080}' 'nodePort needs serviceType NodePort or LoadBalancer'
kn apply --dry-run=server -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: nodeport
spec: {"image": "x", "serviceType": "NodePort", "nodePort": 30080}
YAML
ok "nodePort with serviceType NodePort is accepted"
size_out=$(kn apply --dry-run=server -f - 2>&1 <<'YAML' || true
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: huge
spec: {"size": 51}
YAML
)
[[ "$size_out" == *"spec.size: Invalid value"* ]] || fail "Memcached size 51: '$size_out'"
ok "Memcached size 51 rejected"

step "defaults are filled in by the API server"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: defaults
spec:
  image: registry.k8s.io/pause:3.10
---
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: defaults
YAML
expect_eq "WebApp port and serviceType" "8080 ClusterIP" "$(kn get webapp/defaults -o jsonpath='{.spec.port} {.spec.serviceType}')"
expect_eq "Memcached size and image" "1 memcached:1.6" "$(kn get memcached/defaults -o jsonpath='{.spec.size} {.spec.image}')"
ok "WebApp port 8080 and serviceType ClusterIP; Memcached size 1 and image memcached:1.6"

step "before a controller writes status, observedGeneration reads 0 (the status default)"
# No stencil runs in this scenario: the status is the CRDs' default, which
# keeps kstatus at InProgress until stencil's first status.
for r in webapp/defaults memcached/defaults; do
  expect_eq "$r status" '{"observedGeneration":0}' "$(kn get "$r" -o jsonpath='{.status}')"
done
ok "webapp/defaults and memcached/defaults: status {\"observedGeneration\":0} at generation 1"

step "short names and printer columns"
header=$(kn get wa | sed -n 1p | tr -s ' ')
expect_eq "kubectl get wa columns" "NAME READY REASON REPLICAS IMAGE AGE" "$header"
mc_header=$(kn get mc | sed -n 1p | tr -s " ")
expect_eq "kubectl get mc columns" "NAME READY REASON REPLICAS SIZE AGE" "$mc_header"
wide=$(kn get wa -o wide | sed -n 1p | tr -s ' ')
expect_eq "kubectl get wa -o wide columns" "NAME READY REASON REPLICAS IMAGE PORT SERVICE MESSAGE AGE" "$wide"
[[ "$(k get stencil -n "$NS" -o name)" == *webapp.apps.example.com/defaults* ]] || fail "category stencil does not list the WebApp"
ok "wa: $header; mc: $mc_header; wa -o wide adds PORT SERVICE MESSAGE (before AGE: declared columns come before Age in a generated CRD); kubectl get stencil lists both kinds"
