#!/usr/bin/env bash
# Each configured resource has its own lifecycle: stencil starts with one
# configured CRD missing (the others are served, /readyz 200), serves it as
# soon as it is installed, stops serving it without disturbing the others
# when it is deleted, and serves it again when it comes back: all in one
# process. The CRD is this scenario's own (memcached's, under a group named
# for the namespace), so deleting it touches no other scenario.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace crd-lifecycle
install_crds
group="$NS.example.com"
crd_file=$(mktemp)
defer rm -f "$crd_file"
# Without memcached's short name and category: while it exists (and while
# it is being deleted) it must not change what `kubectl get mc` or `kubectl
# get stencil` mean to the other scenarios.
sed -e "s/cache\.example\.com/$group/g" -e '/^    shortNames:/d' -e '/^    categories:/d' \
  "$smoke_root/crds/memcached-crd.yaml" >"$crd_file"
crd="memcacheds.$group"
defer k delete crd "$crd" --ignore-not-found --timeout=60s
copy_config
cat >>"$CONFIG_DIR/stencil.yaml" <<YAML
  - group: $group
    version: v1alpha1
    resource: memcacheds
    templates: [memcached/deployment.yaml.tmpl]
YAML
served() { metric "stencil_resource_served{resource=\"$crd\"}"; }
readyz() { http_status "$STENCIL_HEALTH" /readyz; }
apply_cache() {
  sed "s|cache.example.com/v1alpha1|$group/v1alpha1|" "$smoke_root/crds/samples/memcached.yaml" | create_once kn apply -f - >/dev/null
}
# ms_since T prints the milliseconds from $EPOCHREALTIME value T to now.
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
# stencil's first reconcile of a resource creates its Deployment.
first_reconcile() { kn get deployment/cache >/dev/null 2>&1; }

step "started with $crd not installed: the other resources are served"
start_stencil --config "$CONFIG_DIR/stencil.yaml"
pid=$STENCIL_PID
apply_samples_ready webapp
expect_eq "/readyz with a configured CRD missing" 200 "$(readyz)"
expect_eq "stencil_resource_served for $crd" 0 "$(served)"
grep -q "Waiting for CRD.*$crd" "$STENCIL_LOG" || fail "no 'Waiting for CRD' line for $crd in $STENCIL_LOG"
ok "webapp/demo Ready, /readyz 200, $crd waited for (served 0), pid $pid"

step "the CRD is installed: its resources reach Ready without a restart"
k apply --server-side -f "$crd_file" >/dev/null
k wait --for=condition=Established "crd/$crd" --timeout=60s >/dev/null
t0=$EPOCHREALTIME
wait_for 30 "the Memcached kind to be served by the API server" apply_cache
serve_ms=$(ms_since "$t0")
t1=$EPOCHREALTIME
wait_for 30 "the first reconcile of memcached/cache" first_reconcile
first_ms=$(ms_since "$t1")
total_ms=$(ms_since "$t0")
kn wait "memcached.$group/cache" --for=condition=Ready --timeout=90s >/dev/null
expect_eq "stencil_resource_served for $crd" 1 "$(served)"
kill -0 "$pid" || fail "stencil exited"
ok "CRD Established -> first reconcile in ${total_ms} ms: the API server accepted a Memcached after ${serve_ms} ms, stencil created its Deployment ${first_ms} ms after that; memcached/cache Ready; same pid $pid"

step "the CRD is deleted: the others keep reconciling, /readyz stays 200, no error storm"
log_lines=$(wc -l <"$STENCIL_LOG")
k delete crd "$crd" --wait=true --timeout=90s >/dev/null
not_served() { [ "$(served)" = 0 ]; }
wait_for 30 "stencil_resource_served for $crd to be 0" not_served
kn patch webapp/demo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
gen2() { [ "$(kn get webapp/demo -o jsonpath='{.status.observedGeneration}')" = 2 ]; }
wait_for 30 "webapp/demo to observe generation 2" gen2
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
expect_eq "/readyz after the CRD was deleted" 200 "$(readyz)"
errors=$(tail -n +"$((log_lines + 1))" "$STENCIL_LOG" | grep -c '^E' || true)
[ "$errors" -le 1 ] || fail "$errors error lines in the log after the CRD was deleted: $(tail -n +"$((log_lines + 1))" "$STENCIL_LOG" | grep '^E' | head -5)"
grep -q "Stopped serving resource.*$crd\|Stopped serving resource.*memcacheds.v1alpha1, Resource=memcacheds" "$STENCIL_LOG" ||
  grep -q "Stopped serving resource" "$STENCIL_LOG" || fail "no 'Stopped serving resource' line in $STENCIL_LOG"
ok "served 0, webapp/demo reconciled to generation 2, /readyz 200, $errors error line(s) in the log"

step "the CRD comes back: served again, same process"
k apply --server-side -f "$crd_file" >/dev/null
k wait --for=condition=Established "crd/$crd" --timeout=60s >/dev/null
wait_for 30 "the Memcached kind to be served by the API server" apply_cache
kn wait "memcached.$group/cache" --for=condition=Ready --timeout=90s >/dev/null
expect_eq "stencil_resource_served for $crd" 1 "$(served)"
kill -0 "$pid" || fail "stencil exited"
ok "memcached/cache Ready again, served 1, same pid $pid"
