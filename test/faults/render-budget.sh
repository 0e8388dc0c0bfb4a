#!/usr/bin/env bash
# One tenant cannot exhaust stencil (the render budget): a stencil process
# under GOMEMLIMIT serves 200 good resources beside 9 hostile ones, one per
# way a tenant's value turns a plausible template into unbounded work: a
# range until a tenant's number (large, and math.MinInt64), a loop in a
# loop over 20,000 host names, repeat of a tenant's width, has over a
# 20,000-item list inside a loop (a call charged by what it reads), and in
# chart mode text a chart runs through tpl and a value printed per row (the
# output bound, where Helm's writer is not stencil's). Nothing restarts,
# the peak RSS stays under 512 MiB (a pod's limit), the good resources'
# time to Ready beside them is within 1.5x of their time alone (measured
# in the same run), each hostile one says RenderFailed naming the bound and
# is rendered once per spec change: stencil_render_budget_exceeded_total
# counts 9, then 18 after a spec change to each, one Warning per change.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace render-budget

# The example config with one more template (shared with
# BenchmarkRenderBudget): the three shapes, each only for a WebApp whose
# spec.config asks for it (the good ones render as ever).
mkdir -p "$WORK/config"
cp -r "$smoke_root/crds/webapp" "$smoke_root/crds/memcached" "$smoke_root/crds/appstack" "$smoke_root/crds/charts" "$WORK/config/"
cp "$smoke_root/test/integration/testdata/budget/budget.yaml.tmpl" "$WORK/config/webapp/"
cp "$smoke_root/test/integration/testdata/budget/hello-budget.yaml" "$WORK/config/charts/hello/templates/budget.yaml"
# The Hello entry runs its tenants' template text (tenantTemplates): by
# default that text lands as written and costs nothing, and the tpl class
# is about what it costs when it runs.
sed -e 's|      - webapp/configmap.yaml.tmpl|&\n      - webapp/budget.yaml.tmpl|' \
  -e 's|^    chart: charts/hello$|&\n    tenantTemplates: true|' "$smoke_root/crds/stencil.yaml" >"$WORK/config/stencil.yaml"
grep -q budget.yaml.tmpl "$WORK/config/stencil.yaml" || fail "could not add the budget template to the config"
grep -q 'tenantTemplates: true' "$WORK/config/stencil.yaml" || fail "could not set tenantTemplates on the Hello entry"
FAULTS_CONFIG="$WORK/config/stencil.yaml"

GOMEMLIMIT=256MiB start_replica a
pid=${RPID[a]}
rmetric() {
  http_get "${RMETRICS[a]}" /metrics | tr -d '\r' |
    awk -v m="$1" '($1 == m || index($1, m "{") == 1) { s += $NF } END { printf "%g", s + 0 }'
}

hosts=$(for ((i = 0; i < 20000; i++)); do printf 'host-%d.example.com,' $((i % 19999)); done)
hostile() {
  local name=$1 key=$2 value=$3
  printf '{"apiVersion":"apps.example.com/v1beta1","kind":"WebApp","metadata":{"name":"%s"},"spec":{"image":"registry.k8s.io/pause:3.10","replicas":1,"config":{"%s":"%s"}}}' \
    "$name" "$key" "$value"
  printf '\n---\n'
}
hostile_hello() {
  local name=$1 data=$2
  printf '{"apiVersion":"charts.example.com/v1","kind":"Hello","metadata":{"name":"%s"},"spec":{"config":{"data":%s}}}' "$name" "$data"
  printf '\n---\n'
}
hostile_names=(wa-shards wa-shards-2 wa-negative wa-hosts wa-members wa-width wa-width-2)
hostile_hellos=(hello-tpl hello-rows)
apis='{{ range $.Capabilities.APIVersions }}'
pad=$(head -c 100000 /dev/zero | tr '\0' g)

step "200 good resources alone: created, then a spec change to each"
t0=$(now_ms)
apply_workload 1
wait_recovered 300
created_alone=$(secs "$t0" "$RECOVERED_MS")
t0=$(now_ms)
apply_workload 2
wait_recovered 300
alone_ms=$((RECOVERED_MS - t0))
ok "created Ready in ${created_alone}s; a spec change to each Ready again in $(secs 0 "$alone_ms")s"

step "9 hostile resources, and at once a spec change to the 200 good ones"
t0=$(now_ms)
{
  hostile wa-shards shards 300000000
  hostile wa-shards-2 shards 2000000000
  hostile wa-negative shards -9223372036854775808
  hostile wa-hosts hosts "${hosts%,}"
  hostile wa-members members "${hosts%,}"
  hostile wa-width width 2000000000
  hostile wa-width-2 width 100000000
  hostile_hello hello-tpl "{\"tplNote\":\"$apis$apis$apis${apis}x{{ end }}{{ end }}{{ end }}{{ end }}\"}"
  hostile_hello hello-rows "{\"rows\":\"1000\",\"pad\":\"$pad\"}"
} | create_once kn create -f - >/dev/null
apply_workload 3
wait_recovered 300
beside_ms=$((RECOVERED_MS - t0))
ratio=$(awk -v a="$alone_ms" -v b="$beside_ms" 'BEGIN { printf "%.2f", b / a }')
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }' || fail "the good resources took ${ratio}x their time alone beside the hostile ones"
ok "all $WORKLOAD good resources Ready again in $(secs 0 "$beside_ms")s beside the hostile ones: ${ratio}x their time alone"

render_failed() {
  local n
  for n in "${hostile_names[@]}"; do
    [ "$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" = RenderFailed ] || return 1
  done
  for n in "${hostile_hellos[@]}"; do
    [ "$(kn get hello "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" = RenderFailed ] || return 1
  done
}
wait_for 60 "the hostile resources to say RenderFailed" render_failed
# The quiet window starts once the hostile ones have reported too (their
# first status is a write): what it must not see is a second one.
RECOVERED_MS=$(now_ms)
for n in "${hostile_names[@]}"; do
  msg=$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
  [[ "$msg" == *"budget.yaml.tmpl:"*"renderBudget."* ]] || fail "$n: Ready message does not name template:line and the bound: $msg"
  [ "$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Stalled")].status}')" = True ] || fail "$n is not Stalled"
done
for n in "${hostile_hellos[@]}"; do
  msg=$(kn get hello "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
  [[ "$msg" == *"budget.yaml:"*"renderBudget."* ]] || fail "$n: Ready message does not name template:line and the bound: $msg"
done
ok "9 hostile resources RenderFailed; e.g. $(kn get webapp wa-negative -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'); $(kn get hello hello-tpl -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'); $(kn get hello hello-rows -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"

step "no hot loop: each hostile resource rendered once"
quiet_window
exceeded=$(rmetric stencil_render_budget_exceeded_total)
expect_eq "renders past the budget over the scenario and the quiet window" 9 "$exceeded"
events() { kn get events --field-selector reason=RenderFailed -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{ n += $1 } END { print n + 0 }'; }
expect_eq "RenderFailed Warning events" 9 "$(events)"

step "a spec change to each: rendered once more each"
for n in "${hostile_names[@]}"; do
  kn patch webapp "$n" --type merge -p '{"spec":{"replicas":2}}' >/dev/null
done
for n in "${hostile_hellos[@]}"; do
  kn patch hello "$n" --type merge -p '{"spec":{"replicaCount":2}}' >/dev/null
done
gen2() {
  local n
  for n in "${hostile_names[@]}"; do
    [ "$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].observedGeneration}')" = 2 ] || return 1
  done
  for n in "${hostile_hellos[@]}"; do
    [ "$(kn get hello "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].observedGeneration}')" = 2 ] || return 1
  done
}
wait_for 60 "the hostile WebApps to report generation 2" gen2
# A measurement period, not a wait for a condition: each status patch's own
# watch event comes back within it, and would render again without the memo.
sleep 10
expect_eq "renders past the budget after a spec change to each" 18 "$(rmetric stencil_render_budget_exceeded_total)"
expect_eq "RenderFailed Warning events after the spec change" 18 "$(events)"

step "nothing restarted, memory within a pod's limit"
running "$pid" || fail "stencil exited"
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
((hwm_kb < 512 * 1024)) || fail "peak RSS $((hwm_kb / 1024)) MiB, over 512 MiB"
ok "one process throughout (pid $pid); peak RSS $((hwm_kb / 1024)) MiB under GOMEMLIMIT=256MiB"

figures "200 good resources: a spec change Ready in $(secs 0 "$alone_ms")s alone, $(secs 0 "$beside_ms")s beside 9 hostile resources (${ratio}x); each hostile one RenderFailed naming the bound, rendered once per spec change (9, then 18), one Warning each; peak RSS $((hwm_kb / 1024)) MiB, no restart; $QUIET_FIGS"
