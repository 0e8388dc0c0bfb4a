#!/usr/bin/env bash
# One tenant cannot exhaust stencil (the render budget, and the wall of
# render workers around it): a stencil process under GOMEMLIMIT serves 200
# good resources beside 9 hostile ones, one per way a tenant's value turns
# a plausible template into unbounded work (a range until a tenant's number,
# large and math.MinInt64, a loop in a loop over 20,000 host names, repeat
# of a tenant's width, has over a 20,000-item list inside a loop, and in
# chart mode text a chart runs through tpl and a value printed per row),
# and beside the hostile corpus (test/hostile): toYaml and toPrettyJson of
# a value 5,000 deep (own templates and a chart), a YAML alias bomb, an
# anchor in a template, join,
# printf width, uniq, a regular expression, randAlphaNum of a tenant's
# length, and 100 MB of output. Its three cases that render within every
# bound (a list 9,990 deep, 40,000 annotations, 60,000 args beside a block
# scalar) are left out: what they render goes to the API server, which is
# not this scenario's point.
# Nothing restarts; the controller's peak RSS stays within 1.5x of its peak
# with the good resources alone (beside the corpus created disarmed: the
# same objects, which no template reads, so that the check measures the
# renders and not the informer cache), and under 512 MiB; the good resources'
# time to Ready beside them is within 1.5x of their time alone (measured in
# the same run); each hostile one says RenderFailed or RenderKilled naming
# the template and the bound, and is rendered once per spec change
# (stencil_render_errors_total counts each once, then twice after a spec
# change to each, one Warning per change).
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
# The hostile corpus's entries, appended to the config's resources (its
# last key), their paths under hostile/.
mkdir -p "$WORK/config/hostile"
cp -r "$smoke_root/test/hostile/templates" "$smoke_root/test/hostile/chart" "$WORK/config/hostile/"
sed -n '/^resources:/,$p' "$smoke_root/test/hostile/stencil.yaml" | tail -n +2 |
  sed -e 's|- templates/|- hostile/templates/|' -e 's|chart: chart$|chart: hostile/chart|' >>"$WORK/config/stencil.yaml"
grep -q 'chart: hostile/chart' "$WORK/config/stencil.yaml" || fail "could not add the hostile corpus's entries to the config"
k apply -f "$smoke_root/test/hostile/crds.yaml" >/dev/null
k wait --for condition=Established --timeout 60s crd/attacks.hostile.example.com crd/chartattacks.charts.hostile.example.com >/dev/null
FAULTS_CONFIG="$WORK/config/stencil.yaml"
HOSTILE="$smoke_root/bin/hostile"
[ -x "$HOSTILE" ] || fail "$HOSTILE is missing; make faults builds it"
corpus_skip=deep-list,chart-annotations,args-block-scalar
mapfile -t corpus < <("$HOSTILE" -names -skip "$corpus_skip")

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

# The corpus is created first, disarmed: the same objects, stored the
# same, under keys no template reads. The controller's memory with the good
# resources alone then holds what any controller caching those objects
# holds, and the comparison below measures what arming them (their renders)
# costs, not the cache.
"$HOSTILE" -disarmed -skip "$corpus_skip" | create_once kn create -f - >/dev/null

step "200 good resources alone (beside the disarmed corpus): created, then a spec change to each"
t0=$(now_ms)
apply_workload 1
wait_recovered 300
created_alone=$(secs "$t0" "$RECOVERED_MS")
t0=$(now_ms)
apply_workload 2
wait_recovered 300
alone_ms=$((RECOVERED_MS - t0))
ok "created Ready in ${created_alone}s; a spec change to each Ready again in $(secs 0 "$alone_ms")s"
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status"; }
alone_hwm_kb=$(hwm)

hostiles=$((${#hostile_names[@]} + ${#hostile_hellos[@]} + ${#corpus[@]}))
step "$hostiles hostile resources, and at once a spec change to the 200 good ones"
tc=$(now_ms)
# Armed in one call: each replaced by the same object with the keys its
# templates read.
"$HOSTILE" -skip "$corpus_skip" | kn replace -f - >/dev/null
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
# The good ones' time counts from their change, made while the controller
# works through the hostile ones (their creation, megabytes of nested JSON
# for the API server, is not stencil's time).
t0=$(now_ms)
created_ms=$((t0 - tc))
apply_workload 3
wait_recovered 300
beside_ms=$((RECOVERED_MS - t0))
ratio=$(awk -v a="$alone_ms" -v b="$beside_ms" 'BEGIN { printf "%.2f", b / a }')
# The contract's aim is 1.2x (measured 1.03x to 1.15x on an idle 2-core
# machine); the check allows 1.5x, as before the wall, for a CI machine
# with another job on a core.
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.5) }' || fail "the good resources took ${ratio}x their time alone beside the hostile ones (created in $(secs 0 "$created_ms")s before)"
ok "all $WORKLOAD good resources Ready again in $(secs 0 "$beside_ms")s beside the hostile ones: ${ratio}x their time alone (the hostile ones created or armed in $(secs 0 "$created_ms")s before)"

ready_field() { kn get "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"${4:-Ready}\")].$3}"; }
render_failed() {
  local n c
  # A render the budget would stop may instead run into its deadline
  # (RenderKilled) when the CPU is busy: a slow render's worker runs at the
  # lowest priority, with only what the CPU has spare.
  for n in "${hostile_names[@]}"; do
    case "$(ready_field webapp "$n" reason)" in RenderFailed | RenderKilled) ;; *) return 1 ;; esac
  done
  for n in "${hostile_hellos[@]}"; do
    case "$(ready_field hello "$n" reason)" in RenderFailed | RenderKilled) ;; *) return 1 ;; esac
  done
  for c in "${corpus[@]}"; do
    case "$(ready_field "${c% *}" "${c#* }" reason)" in RenderFailed | RenderKilled) ;; *) return 1 ;; esac
  done
}
wait_for 60 "the hostile resources to say RenderFailed" render_failed
# The quiet window starts once the hostile ones have reported too (their
# first status is a write): what it must not see is a second one.
RECOVERED_MS=$(now_ms)
# A render the budget stops names template:line and the bound. One that
# ran into its deadline instead, its worker starved of CPU (render_failed
# above), is RenderKilled: the wall names the template (a chart's name, for
# a chart) and the bound, and knows no line.
for n in "${hostile_names[@]}"; do
  msg=$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
  [[ "$msg" == *"budget.yaml.tmpl:"*"renderBudget."* ]] ||
    { [ "$(ready_field webapp "$n" reason)" = RenderKilled ] && [[ "$msg" == *"budget.yaml.tmpl"*"render worker killed"*"renderBudget."* ]]; } ||
    fail "$n: Ready message does not name template:line and the bound: $msg"
  [ "$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Stalled")].status}')" = True ] || fail "$n is not Stalled"
done
for n in "${hostile_hellos[@]}"; do
  msg=$(kn get hello "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
  [[ "$msg" == *"budget.yaml:"*"renderBudget."* ]] ||
    { [ "$(ready_field hello "$n" reason)" = RenderKilled ] && [[ "$msg" == *"charts/hello"*"render worker killed"*"renderBudget."* ]]; } ||
    fail "$n: Ready message does not name template:line and the bound: $msg"
done
killed=0
expects=()
for c in "${corpus[@]}"; do
  # Children rendered while disarmed stay: a failed render prunes nothing.
  expects+=(--expect "${c#* }=$(ready_field "${c% *}" "${c#* }" reason)")
  msg=$(ready_field "${c% *}" "${c#* }" message)
  [[ "$msg" =~ (templates/|chart).*(renderBudget\.|the bound of one template|render\ worker\ killed) ]] ||
    fail "${c#* }: Ready message does not name the template and the bound: $msg"
  [ "$(ready_field "${c% *}" "${c#* }" status Stalled)" = True ] || fail "${c#* } is not Stalled"
  if [ "$(ready_field "${c% *}" "${c#* }" reason)" = RenderKilled ]; then killed=$((killed + 1)); fi
  echo "    ${c#* }: $(ready_field "${c% *}" "${c#* }" reason): ${msg:0:200}"
done
ok "${#corpus[@]} resources of the hostile corpus RenderFailed or RenderKilled ($killed killed their worker)"
ok "9 hostile resources RenderFailed; e.g. $(kn get webapp wa-negative -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'); $(kn get hello hello-tpl -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'); $(kn get hello hello-rows -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"

step "no hot loop: each hostile resource rendered once"
quiet_window "${expects[@]}"
expect_eq "failed renders over the scenario and the quiet window" "$hostiles" "$(rmetric stencil_render_errors_total)"
events() {
  local r
  for r in RenderFailed RenderKilled; do
    kn get events --field-selector reason=$r -o jsonpath='{range .items[*]}{.count}{"\n"}{end}'
  done | awk '{ n += $1 } END { print n + 0 }'
}
expect_eq "RenderFailed and RenderKilled Warning events" "$hostiles" "$(events)"

step "a spec change to each: rendered once more each"
for n in "${hostile_names[@]}"; do
  kn patch webapp "$n" --type merge -p '{"spec":{"replicas":2}}' >/dev/null
done
for n in "${hostile_hellos[@]}"; do
  kn patch hello "$n" --type merge -p '{"spec":{"replicaCount":2}}' >/dev/null
done
for c in "${corpus[@]}"; do
  kn patch "${c% *}" "${c#* }" --type merge -p '{"spec":{"bump":1}}' >/dev/null
done
gen2() {
  local n
  for n in "${hostile_names[@]}"; do
    [ "$(kn get webapp "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].observedGeneration}')" = 2 ] || return 1
  done
  for n in "${hostile_hellos[@]}"; do
    [ "$(kn get hello "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].observedGeneration}')" = 2 ] || return 1
  done
  for c in "${corpus[@]}"; do
    # Created disarmed (1), armed (2), then changed (3).
    [ "$(ready_field "${c% *}" "${c#* }" observedGeneration)" = 3 ] || return 1
  done
}
wait_for 60 "the hostile WebApps to report generation 2" gen2
# A measurement period, not a wait for a condition: each status patch's own
# watch event comes back within it, and would render again without the memo.
sleep 10
expect_eq "failed renders after a spec change to each" $((2 * hostiles)) "$(rmetric stencil_render_errors_total)"
expect_eq "RenderFailed and RenderKilled Warning events after the spec change" $((2 * hostiles)) "$(events)"

step "nothing restarted, memory within a pod's limit"
running "$pid" || fail "stencil exited"
hwm_kb=$(hwm)
((hwm_kb < 512 * 1024)) || fail "peak RSS $((hwm_kb / 1024)) MiB, over 512 MiB"
# The aim is 1.2x; measured 1.26x: the rest is the informer's copies of
# the megabyte objects the arming replaced and their status patches, and
# the collector's headroom over them. 1.5x bounds it.
((hwm_kb * 10 <= alone_hwm_kb * 15)) || fail "peak RSS $((hwm_kb / 1024)) MiB, over 1.5x its $((alone_hwm_kb / 1024)) MiB with the good resources alone"
killed_total=$(rmetric stencil_renders_killed_total)
starts=$(rmetric stencil_render_worker_starts_total)
ok "one process throughout (pid $pid); peak RSS $((hwm_kb / 1024)) MiB ($((alone_hwm_kb / 1024)) MiB with the good resources alone) under GOMEMLIMIT=256MiB; $killed_total renders killed their worker, $starts workers started"

figures "200 good resources: a spec change Ready in $(secs 0 "$alone_ms")s alone, $(secs 0 "$beside_ms")s beside $hostiles hostile resources (${ratio}x); each hostile one RenderFailed or RenderKilled naming the bound, rendered once per spec change ($hostiles, then $((2 * hostiles))), one Warning each; $killed_total renders killed a worker, $starts workers started; controller peak RSS $((hwm_kb / 1024)) MiB (alone $((alone_hwm_kb / 1024)) MiB), no restart; $QUIET_FIGS"
