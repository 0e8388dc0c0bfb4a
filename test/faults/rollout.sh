#!/usr/bin/env bash
# Changing templates safely: 20 WebApps, each a Deployment and a Service,
# under an entry with rollout {maxInFlight: 3, maxFailed: 1}. Every change
# below is to the Deployment template alone: the Services' render never
# changes, and no Service is written after its create (counted at the
# proxy, per phase).
#   1. stencil diff of an image change, through the counting proxy: 20
#      Deployment updates naming the image path with old and new value, 20
#      unchanged Services, a JSON form that parses to docs/operating.md's schema,
#      exit 0 for the running config, and 0 persisted writes.
#   2. The image change, hot-reloaded: it reaches all 20, never more than 3
#      moved and not Ready at once (sampled from the cluster, not from
#      stencil).
#   3. A bad change (a node selector nothing matches, progressDeadlineSeconds
#      10): at most 3 resources move, the rollout halts with a Warning
#      event; it still holds after a restart, which writes no child.
#   4. The revert heals them: every WebApp Ready on the reverted templates.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace rollout
WORKLOAD=20
dir="$WORK/rollout"
mkdir -p "$dir"
cat >"$dir/stencil.yaml" <<'EOF'
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [deployment.yaml.tmpl, service.yaml.tmpl]
    rollout: {maxInFlight: 3, maxFailed: 1}
EOF
cat >"$dir/service.yaml.tmpl" <<'EOF'
apiVersion: v1
kind: Service
metadata:
  name: {{ .Name }}
spec:
  selector: {rollout: {{ .Name }}}
  ports: [{port: 80}]
EOF
# template TAG [NODE-SELECTOR] writes the Deployment template with the
# pause image TAG, and a node selector when given.
template() {
  local selector=""
  [ -z "${2:-}" ] || selector="nodeSelector: {$2}"
  cat >"$dir/deployment.yaml.tmpl.new" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: {{ .Spec.replicas | int64 }}
  progressDeadlineSeconds: 10
  selector: {matchLabels: {rollout: {{ .Name }}}}
  template:
    metadata: {labels: {rollout: {{ .Name }}}}
    spec:
      $selector
      containers:
        - {name: web, image: "registry.k8s.io/pause:$1"}
EOF
  # Renamed into place: the reload never reads half a file.
  mv "$dir/deployment.yaml.tmpl.new" "$dir/deployment.yaml.tmpl"
}
template 3.10
FAULTS_CONFIG="$dir/stencil.yaml"

step "$WORKLOAD WebApps converge under an entry with rollout {maxInFlight: 3, maxFailed: 1}"
start_replica a --config-poll 1s
for i in $(seq -f '%02g' 1 "$WORKLOAD"); do
  printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: r%s, labels: {faults.stencil.dev/workload: "true"}}\nspec: {image: unused, replicas: 1}\n---\n' "$i"
done | create_once kn apply -f - >/dev/null
wait_recovered 180
ok "$WORKLOAD WebApps Ready"

# revisions prints, per WebApp, its name, the template revision its status
# names, and its Deployment's generation, observedGeneration,
# updatedReplicas, availableReplicas and replicas.
revisions() {
  kn get webapps,deployments -o jsonpath='{range .items[*]}{.kind},{.metadata.name},{.status.templateRevision},{.metadata.generation},{.status.observedGeneration},{.status.updatedReplicas},{.status.availableReplicas},{.spec.replicas}{"\n"}{end}' |
    awk -F, '$1 == "WebApp" { rev[$2] = ($3 == "" ? "-" : $3) } $1 == "Deployment" { d[$2] = $4 " " $5 " " $6 " " $7 " " $8 }
      END { for (n in rev) if (n in d) print n, rev[n], d[n] }'
}
old_rev=$(revisions | awk 'NR == 1 { print $2 }')
case "$old_rev" in "" | -) fail "the WebApps' status names no template revision: $(revisions | head -n 3)" ;; esac
annotated=$(kn get deployments,services -l app.kubernetes.io/managed-by=stencil -o jsonpath='{range .items[*]}{.metadata.annotations.stencil\.dev/template-revision}{"\n"}{end}' | grep -c . || true)
expect_eq "children carrying a template revision annotation (the status holds it)" 0 "$annotated"
# writes_of RESOURCE FROM counts the writes of RESOURCE (deployments,
# services) persisted since FROM.
writes_of() { proxy_writes "$2" "" | awk -v r="$1" '$4 == r && $8 != "true"' | wc -l; }

step "stencil diff of an image change: 20 updates, exit 1; the running config: exit 0; no write"
mkdir -p "$WORK/next"
cp "$dir/stencil.yaml" "$dir/service.yaml.tmpl" "$WORK/next/"
sed 's/pause:3.10/pause:3.9/' "$dir/deployment.yaml.tmpl" >"$WORK/next/deployment.yaml.tmpl"
diff_start=$(now_ms)
rc=0
"$STENCIL" diff --config "$WORK/next/stencil.yaml" --kubeconfig "$WORK/kubeconfig-b" --namespace "$NS" >"$WORK/plan.txt" 2>"$WORK/plan.err" || rc=$?
expect_eq "stencil diff exit code for an image change (stderr: $(head -c 300 "$WORK/plan.err"))" 1 "$rc"
if ! grep -q '^~ update 20 Deployments' "$WORK/plan.txt" ||
  ! grep -qF 'spec.template.spec.containers[name=web].image registry.k8s.io/pause:3.10 -> registry.k8s.io/pause:3.9' "$WORK/plan.txt"; then
  fail "the plan lacks the 20 image updates: $(head -c 800 "$WORK/plan.txt")"
fi
sed "s/^/[$SCENARIO] plan: /" "$WORK/plan.txt"
rc=0
"$STENCIL" diff --config "$WORK/next/stencil.yaml" --kubeconfig "$WORK/kubeconfig-b" --namespace "$NS" -o json >"$WORK/plan.json" 2>>"$WORK/plan.err" || rc=$?
expect_eq "stencil diff -o json exit code" 1 "$rc"
parsed=$("$FAULTCHECK" diff-json <"$WORK/plan.json") || fail "the JSON plan: $parsed"
expect_eq "the JSON plan's summary (20 Deployments updated, 20 Services unchanged)" "create=0 update=20 prune=0 unchanged=20" "$(head -n 1 <<<"$parsed")"
grep -qx 'Deployment update spec.template.spec.containers\[name=web\].image 20' <<<"$parsed" ||
  fail "the JSON plan lacks 20 image updates: $parsed"
rc=0
"$STENCIL" diff --config "$dir/stencil.yaml" --kubeconfig "$WORK/kubeconfig-b" --namespace "$NS" >"$WORK/same.txt" 2>>"$WORK/plan.err" || rc=$?
expect_eq "stencil diff exit code for the running config ($(tail -n 1 "$WORK/same.txt"))" 0 "$rc"
persisted=$(proxy_writes "$diff_start" "" b | awk '$8 != "true"' | wc -l)
dry=$(proxy_writes "$diff_start" "" b | awk '$8 == "true"' | wc -l)
expect_eq "persisted writes by the three diffs" 0 "$persisted"
ok "20 image updates and 20 unchanged Services (text and JSON), the running config exit 0; $dry dry-run applies, 0 persisted writes"

# sample_rollout OLD OUT samples, four times a second until killed, the
# Deployments moved off revision OLD and not yet available, and appends
# the count.
sample_rollout() {
  while :; do
    revisions | awk -v rev="$1" '$2 != rev && ($3 != $4 || $5 != $7 || $6 != $7) { n++ } END { print n + 0 }' >>"$2"
    sleep 0.25
  done
}
# moved REV prints how many Deployments carry template revision REV.
moved() { revisions | awk -v rev="$1" '$2 == rev { n++ } END { print n + 0 }'; }
# settled REV succeeds once every Deployment is on REV and available.
settled() {
  local n
  n=$(revisions | awk -v rev="$1" '$2 == rev && $3 == $4 && $5 == $7 && $6 == $7 { n++ } END { print n + 0 }')
  ((n == WORKLOAD)) || { echo "$n of $WORKLOAD Deployments on $1 and available"; return 1; }
}
metric() { http_get "${RMETRICS[$1]}" /metrics | awk -v m="$2" '$1 == m { print $2 }'; }

step "the image change, reloaded: all 20 move, never more than 3 in flight"
good_start=$(now_ms)
template 3.9
: >"$WORK/samples"
sample_rollout "$old_rev" "$WORK/samples" &
sampler=$!
defer kill "$sampler"
on_new() {
  new_rev=$(revisions | awk -v rev="$old_rev" '$2 != rev { print $2; exit }')
  [ -n "$new_rev" ] && settled "$new_rev"
}
wait_for 180 "all 20 Deployments on a new revision and available" on_new
kill "$sampler" 2>/dev/null || true
new_rev=$(revisions | awk -v rev="$old_rev" '$2 != rev { print $2; exit }')
good_ms=$(($(now_ms) - good_start))
peak=$(sort -n "$WORK/samples" | tail -n 1)
((peak <= 3)) || fail "up to $peak Deployments were moved and not available at once (maxInFlight 3); samples: $(tr '\n' ' ' <"$WORK/samples" | head -c 400)"
((peak >= 1)) || fail "no sample saw a Deployment in flight: $(wc -l <"$WORK/samples") samples"
wait_recovered 60
expect_eq "Service writes for a Deployment-template change" 0 "$(writes_of services "$good_start")"
expect_eq "Deployment writes for a Deployment-template change (each once)" "$WORKLOAD" "$(writes_of deployments "$good_start")"
ok "all 20 moved in $(secs 0 "$good_ms")s; at most $peak moved and not available at once in $(wc -l <"$WORK/samples") samples; $WORKLOAD Deployment writes, 0 Service writes"

step "a bad change (pods nothing can schedule): at most 3 move, then the rollout halts"
bad_start=$(now_ms)
template 3.9 'stencil.dev/nowhere: "true"'
# halted TAG succeeds once replica TAG reports the rollout halted.
halted() {
  local h
  h=$(metric "$1" 'stencil_rollout_halted{resource="webapps.apps.example.com"}')
  [ "$h" = 1 ] || { echo "stencil_rollout_halted is '$h'"; return 1; }
}
wait_for 120 "the rollout to halt" halted a
bad_rev=$(revisions | awk -v g="$new_rev" '$2 != g { print $2; exit }')
[ -n "$bad_rev" ] || fail "no Deployment moved to the bad revision"
at_halt=$(moved "$bad_rev")
((at_halt >= 1 && at_halt <= 3)) || fail "$at_halt Deployments moved to the bad revision, want 1 to 3"
halt_ms=$(($(now_ms) - bad_start))
event=$(kn get events --field-selector reason=RolloutHalted -o jsonpath='{range .items[*]}{.type} {.involvedObject.name}: {.message}{"\n"}{end}')
[[ "$event" == Warning* ]] || fail "no Warning event RolloutHalted: '$event'"
pending=$(metric a 'stencil_rollout_resources{resource="webapps.apps.example.com",state="pending"}')
ok "halted $(secs 0 "$halt_ms")s after the change with $at_halt moved, $pending pending; event: ${event:0:300}"

step "it holds: nothing more moves, and a restart neither moves nor writes a child"
# A tenant edits a resource that has not moved: the edit waits with it
# (docs/operating.md), its status keeps the old observedGeneration.
edited=$(revisions | awk -v rev="$new_rev" '$2 == rev { print $1; exit }')
edited_gen=$(kn get webapp "$edited" -o jsonpath='{.metadata.generation}')
kn patch webapp "$edited" --type merge -p '{"spec":{"replicas":2}}' >/dev/null
# A measurement period after the halt, not a wait for a condition.
sleep 10
expect_eq "Deployments on the bad revision 10s after the halt" "$at_halt" "$(moved "$bad_rev")"
expect_eq "replicas of the edited, not moved $edited's Deployment" 1 "$(kn get deployment "$edited" -o jsonpath='{.spec.replicas}')"
expect_eq "observedGeneration of the edited, not moved $edited" "$edited_gen" "$(kn get webapp "$edited" -o jsonpath='{.status.observedGeneration}')"
signal_replica a TERM
wait_replica_exit a 30
restart=$(now_ms)
start_replica b --config-poll 1s
synced() {
  local m
  m=$(http_get "${RMETRICS[b]}" /metrics)
  awk -v n="$WORKLOAD" '/^stencil_reconcile_total\{/ && /webapps/ { s += $NF } /^workqueue_depth\{/ { d += $NF }
    END { if (s >= n && d == 0) exit 0; printf "reconciles %d of %d, queue %d\n", s, n, d; exit 1 }' <<<"$m"
}
wait_for 60 "b to look at every WebApp" synced
wait_for 30 "b to report the halt" halted b
expect_eq "Deployments on the bad revision after the restart" "$at_halt" "$(moved "$bad_rev")"
child_writes_b=$(proxy_writes "$restart" "" b | awk '$4 == "deployments" && $8 != "true"' | wc -l)
expect_eq "Deployment writes by the restarted process" 0 "$child_writes_b"
ok "still $at_halt moved after 10s and after a restart; the restart wrote 0 Deployments; $edited's spec edit waits (replicas 1, observedGeneration $edited_gen)"

step "the revert heals them"
revert_start=$(now_ms)
template 3.9
wait_for 180 "all 20 Deployments back on revision $new_rev and available" settled "$new_rev"
wait_recovered 120
revert_ms=$(($(now_ms) - revert_start))
expect_eq "Deployments on the bad revision after the revert" 0 "$(moved "$bad_rev")"
expect_eq "Service writes for the bad change, the restart and the revert" 0 "$(writes_of services "$bad_start")"
expect_eq "replicas of $edited's Deployment after the revert" 2 "$(kn get deployment "$edited" -o jsonpath='{.spec.replicas}')"
ok "the $at_halt moved Deployments are back on $new_rev, $edited's edit applied (replicas 2), all 20 Ready, $(secs 0 "$revert_ms")s after the revert"

QUIET_REPLICAS=b QUIET_SECONDS=20 quiet_window
figures "stencil diff: 20 image updates and 20 unchanged Services, running config exit 0, $dry dry runs, 0 persisted writes; good change: all 20 moved in $(secs 0 "$good_ms")s with 20 Deployment writes, peak $peak of maxInFlight 3 in flight; bad change: halted after $(secs 0 "$halt_ms")s with $at_halt moved, $pending pending, held 10s and across a restart (0 Deployment writes), a spec edit of a resource not moved waited; revert healed in $(secs 0 "$revert_ms")s; 0 Service writes after the creates; $QUIET_FIGS"
