#!/usr/bin/env bash
# Drift: a field the template sets, edited by hand, is set back; a field the
# template does not set (replicas, when the WebApp leaves spec.replicas unset
# so that an HPA may own it) is left to whoever set it.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace drift
install_crds
start_stencil

step "a WebApp without spec.replicas gets a Deployment whose replicas stencil does not own"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: auto
spec:
  image: registry.k8s.io/pause:3.10
YAML
kn wait webapp/auto --for=condition=Ready --timeout=60s >/dev/null
stencil_fields=$(kn get deployment/auto --show-managed-fields \
  -o jsonpath='{range .metadata.managedFields[?(@.manager=="stencil")]}{.fieldsV1}{end}')
[[ "$stencil_fields" != *'"f:replicas"'* ]] || fail "stencil's managed fields include spec.replicas: $stencil_fields"
ok "deployment/auto: spec.replicas is not among the fields stencil manages"

step "scaling by hand (as an HPA would) to 3 and editing the image by hand"
kn scale deployment/auto --replicas=3 >/dev/null
kn set image deployment/auto web=registry.k8s.io/pause:hand-edited >/dev/null
image_reverted() {
  local got
  got=$(kn get deployment/auto -o jsonpath='{.spec.template.spec.containers[0].image}')
  [ "$got" = registry.k8s.io/pause:3.10 ] || { echo "image is '$got'"; return 1; }
}
wait_for 30 "the hand-edited image to be set back" image_reverted
expect_eq "deployment/auto replicas after stencil's correction" 3 "$(kn get deployment/auto -o jsonpath='{.spec.replicas}')"
ok "image set back to registry.k8s.io/pause:3.10; replicas stayed 3"

step "a hand-edited Service targetPort is set back too"
kn patch service/auto --type=json -p '[{"op":"replace","path":"/spec/ports/0/targetPort","value":9999}]' >/dev/null
target_reverted() {
  local got
  got=$(kn get service/auto -o jsonpath='{.spec.ports[0].targetPort}')
  [ "$got" = http ] || { echo "targetPort is '$got'"; return 1; }
}
wait_for 30 "the hand-edited targetPort to be set back" target_reverted
ok "service/auto targetPort set back from 9999 to http"

kn wait webapp/auto --for=condition=Ready --timeout=60s >/dev/null
expect_eq "status.replicas follows the Deployment" 3 "$(kn get webapp/auto -o jsonpath='{.status.replicas}')"
ok "webapp/auto Ready=True with 3 replicas"
