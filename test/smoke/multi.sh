#!/usr/bin/env bash
# One stencil process serves two CRDs at once: a WebApp and a Memcached side
# by side, each with its own children, status and spec changes.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace multi
install_crds
start_stencil

step "a WebApp and a Memcached served by the same controller"
apply_samples_ready webapp memcached
expect_eq "memcached/cache owner of deployment/cache" Memcached/cache \
  "$(kn get deployment/cache -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')"
expect_eq "webapp/demo owner of deployment/demo" WebApp/demo \
  "$(kn get deployment/demo -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')"
gone service/cache >/dev/null || fail "service/cache exists; the Memcached templates render no Service"
ok "$(kn get webapps,memcacheds --no-headers | awk '{print $1" Ready="$2" Reason="$3}' | paste -sd' ')"

step "scaling the Memcached to 3 touches only its Deployment"
dep_gen=$(kn get deployment/demo -o jsonpath='{.metadata.generation}')
kn patch memcached/cache --type=merge -p '{"spec":{"size":3}}' >/dev/null
kn wait deployment/cache --for=jsonpath='{.status.readyReplicas}'=3 --timeout=60s >/dev/null
kn wait memcached/cache --for=jsonpath='{.status.readyReplicas}'=3 --timeout=60s >/dev/null
expect_eq "deployment/demo generation" "$dep_gen" "$(kn get deployment/demo -o jsonpath='{.metadata.generation}')"
ok "memcached/cache: 3 of 3 ready; deployment/demo untouched at generation $dep_gen"
