#!/usr/bin/env bash
# A CRD whose status schema declares only phase: the API server prunes
# observedGeneration, replicas and the conditions stencil computes. stencil
# prunes its desired status by the same schema before comparing, so a
# restart over converged resources writes nothing, counted outside the
# process (before, each restart sent one no-op status patch per resource).
# Then the entry gets a rollout: the schema would prune
# status.templateRevision too, so the revision goes on each child instead
# (docs/operating.md), every Deployment once, and a restart reads it back
# from them and writes nothing.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

PROXY_TAGS="a b c d"
use_namespace status-schema
N=20
create_once k apply -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.faults.stencil.dev
spec:
  group: faults.stencil.dev
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status:
              type: object
              properties:
                phase: {type: string}
EOF
k wait --for=condition=Established crd/gizmos.faults.stencil.dev --timeout=60s >/dev/null
mkdir -p "$WORK/gizmo"
cat >"$WORK/gizmo/stencil.yaml" <<'EOF'
resources:
  - group: faults.stencil.dev
    version: v1
    resource: gizmos
    templates: [deployment.yaml.tmpl]
EOF
cat >"$WORK/gizmo/deployment.yaml.tmpl" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: 1
  selector: {matchLabels: {gizmo: {{ .Name }}}}
  template:
    metadata: {labels: {gizmo: {{ .Name }}}}
    spec:
      containers:
        - {name: main, image: registry.k8s.io/pause:3.10}
EOF
FAULTS_CONFIG="$WORK/gizmo/stencil.yaml"

step "$N Gizmos converge: Ready, the phase the only status field stored"
start_replica a
for i in $(seq -f '%02g' 1 "$N"); do
  printf 'apiVersion: faults.stencil.dev/v1\nkind: Gizmo\nmetadata: {name: g%s}\nspec: {}\n---\n' "$i"
done | create_once kn apply -f - >/dev/null
all_ready() {
  local n
  n=$(kn get gizmos -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Ready$' || true)
  ((n == N)) || { echo "$n of $N Gizmos have phase Ready"; return 1; }
}
wait_for 120 "every Gizmo phase Ready" all_ready
expect_eq "g01's stored status" '{"phase":"Ready"}' "$(kn get gizmo/g01 -o jsonpath='{.status}')"
ok "$N Gizmos Ready; the API server stored only the phase"

step "stencil restarts over the converged Gizmos: no write"
signal_replica a TERM
wait_replica_exit a 30
restart=$(now_ms)
start_replica b
# synced TAG succeeds once replica TAG has looked at every Gizmo: its
# reconciles counted N and its queue is empty.
synced() {
  local m
  m=$(http_get "${RMETRICS[$1]}" /metrics)
  awk -v n="$N" '/^stencil_reconcile_total\{/ && /gizmos/ { s += $NF } /^workqueue_depth\{/ { d += $NF }
    END { if (s >= n && d == 0) exit 0; printf "reconciles %d of %d, queue %d\n", s, n, d; exit 1 }' <<<"$m"
}
# wrote_nothing TAG WHAT waits until replica TAG, started at $restart, has
# looked at every Gizmo, and checks that it wrote nothing (Leases aside).
wrote_nothing() {
  local writes
  wait_for 60 "$1 to reconcile every Gizmo" synced "$1"
  writes=$(proxy_writes "$restart" "" "$1" | grep -vc ' leases ' || true)
  [ "$writes" = 0 ] || echo "[$SCENARIO] the writes: $(proxy_writes "$restart" "" "$1" | head -n 5)" >&2
  expect_eq "writes by the restarted process over $2 (status patches included)" 0 "$writes"
}
wrote_nothing b "converged Gizmos"
ok "restarted: $N reconciles, 0 writes"

step "a rollout on the entry: the schema prunes status.templateRevision, so each Deployment carries the revision"
signal_replica b TERM
wait_replica_exit b 30
printf '    rollout: {maxInFlight: 5, maxFailed: 1}\n' >>"$WORK/gizmo/stencil.yaml"
moved=$(now_ms)
start_replica c
# annotated prints how many Deployments carry a template revision.
annotated() { kn get deployments -o jsonpath='{range .items[*]}{.metadata.annotations.stencil\.dev/template-revision}{"\n"}{end}' | grep -c . || true; }
all_annotated() {
  local n
  n=$(annotated)
  ((n == N)) || { echo "$n of $N Deployments carry a template revision"; return 1; }
}
wait_for 120 "every Deployment to carry the template revision" all_annotated
wait_for 60 "every Gizmo phase Ready" all_ready
wait_for 60 "c to reconcile every Gizmo" synced c
expect_eq "g01's stored status (templateRevision pruned)" '{"phase":"Ready"}' "$(kn get gizmo/g01 -o jsonpath='{.status}')"
deployment_writes=$(proxy_writes "$moved" "" c | awk '$4 == "deployments" && $8 != "true"' | wc -l)
expect_eq "Deployment writes to stamp the revision (each once)" "$N" "$deployment_writes"
signal_replica c TERM
wait_replica_exit c 30
restart=$(now_ms)
start_replica d
wrote_nothing d "the moved Gizmos"
ok "the revision on each of the $N Deployments ($deployment_writes writes), none in status; restarted: 0 writes"
figures "$N Gizmos whose status schema prunes all but phase: 0 writes after a restart; with a rollout, the revision on each Deployment ($deployment_writes writes) and 0 writes after a restart"
