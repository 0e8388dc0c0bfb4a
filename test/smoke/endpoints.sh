#!/usr/bin/env bash
# What an operator scrapes and probes: /healthz and /readyz answer, and
# /metrics carries every series docs/operating.md names, stencil's own from start-up
# (before any resource exists), counting real work once there is some, and
# passes promtool check metrics (the pinned bin/promtool).
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace endpoints
install_crds
start_stencil

step "/healthz and /readyz answer 200"
expect_eq "/healthz" 200 "$(http_status "$STENCIL_HEALTH" /healthz)"
expect_eq "/readyz" 200 "$(http_status "$STENCIL_HEALTH" /readyz)"
ok "/healthz 200, /readyz 200 on 127.0.0.1:$STENCIL_HEALTH"

step "stencil's series exist before any resource does"
metrics=$(scrape_metrics)
for series in \
  'stencil_reconcile_total{resource="webapps.apps.example.com",result="success"} 0' \
  'stencil_reconcile_total{resource="memcacheds.cache.example.com",result="error"} 0' \
  'stencil_status_patches_total{resource="webapps.apps.example.com"} 0' \
  'stencil_render_errors_total{resource="memcacheds.cache.example.com"} 0' \
  'stencil_child_writes_total{kind="Deployment",resource="webapps.apps.example.com",verb="create"} 0'; do
  grep -qxF "$series" <<<"$metrics" || fail "/metrics lacks '$series'"
done
ok "reconcile, status patch, render error and child write series at 0"

step "stencil_build_info names the version, and stencil_leader is 1 without leader election"
grep -qE '^stencil_build_info\{go_version="go[^"]+",version="[^"]+"\} 1$' <<<"$metrics" || fail "/metrics lacks stencil_build_info"
grep -qxF 'stencil_leader 1' <<<"$metrics" || fail "/metrics lacks 'stencil_leader 1'"
ok "$(grep '^stencil_build_info' <<<"$metrics"), stencil_leader 1"

step "a WebApp's create shows in the counters"
apply_samples_ready webapp
metrics=$(scrape_metrics)
for name in stencil_reconcile_duration_seconds_count workqueue_depth workqueue_adds_total \
  workqueue_retries_total workqueue_queue_duration_seconds_count workqueue_work_duration_seconds_count \
  rest_client_requests_total go_goroutines process_resident_memory_bytes; do
  grep -q "^${name}[{ ]" <<<"$metrics" || fail "/metrics lacks $name"
done
writes=$(metric stencil_child_writes_total)
# Deployment, Service, ConfigMap and PodDisruptionBudget of the sample.
expect_eq "stencil_child_writes_total after one WebApp" 4 "$writes"
((  $(metric stencil_status_patches_total) >= 1 )) || fail "no status patch counted"
ok "child writes $writes, status patches $(metric stencil_status_patches_total), reconciles $(metric stencil_reconcile_total), REST requests $(metric rest_client_requests_total); workqueue, rest_client, go and process series present"

step "/metrics passes promtool check metrics (names, types, units, help)"
promtool="$smoke_root/bin/promtool"
[ -x "$promtool" ] || fail "$promtool is missing; make smoke builds it (make tools, or make promtool)"
# http_get prints the whole HTTP response: promtool gets the body only.
body() { tr -d '\r' | sed '1,/^$/d'; }
lint=$(scrape_metrics | body | "$promtool" check metrics 2>&1) || fail "promtool check metrics found problems: $lint"
ok "promtool check metrics: no problems in $(grep -c '^[a-z]' <<<"$metrics") samples of $(grep -c '^# TYPE' <<<"$metrics") metrics"
