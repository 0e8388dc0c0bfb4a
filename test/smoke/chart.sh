#!/usr/bin/env bash
# Chart mode through helm-operator's watches.yaml, as a team moves from
# helm-operator: the example chart crds/charts/hello, unmodified, serves
# Hello resources. A resource becomes Ready and Deployed (helm-operator's
# condition, message the chart's NOTES.txt, status.deployedRelease.name);
# objects helm-operator created for a resource (controlled by its UID) are
# taken over in place, same UIDs, the same pods (no restart), at most one
# write each; converged and after a restart stencil writes nothing; a
# value change updates a child, and disabling a part of the chart prunes
# it; the chart's test hook is not applied, and a Warning event says so.
# The taken-over resource says Deployed TakeoverSuccessful, keeps
# helm-operator's finalizer and release Secret (the way back), and once
# deleted is gone with its objects: stencil releases the finalizer.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace chart
install_crds
CONFIG_DIR=$(mktemp -d)
cp -r "$smoke_root/crds/charts" "$CONFIG_DIR/"
# helm-operator's fields stencil reads but does not use are there too.
cat >"$CONFIG_DIR/watches.yaml" <<'WATCHES'
- group: charts.example.com
  version: v1
  kind: Hello
  chart: charts/hello
  overrideValues:
    podAnnotations.team: platform
  reconcilePeriod: 1m
  maxConcurrentReconciles: 2
  watchDependentResources: true
WATCHES

step "objects helm-operator created for hello/legacy (controlled by its UID, managed-by Helm)"
create_once kn apply -f - >/dev/null <<'CR'
apiVersion: charts.example.com/v1
kind: Hello
metadata: {name: legacy}
spec: {greeting: "hi from helm-operator"}
CR
uid=$(kn get hello/legacy -o jsonpath='{.metadata.uid}')
# What the chart renders for it, as helm-operator's release left it: the
# chart's own labels, its controller reference, none of stencil's.
kn get hello/legacy -o yaml >"$CONFIG_DIR/legacy.yaml"
"$STENCIL" render --watches "$CONFIG_DIR/watches.yaml" -f "$CONFIG_DIR/legacy.yaml" 2>/dev/null |
  sed -e 's/managed-by: stencil/managed-by: Helm/' -e '/stencil.dev\/owner-uid/d' -e "s/uid: \"\"/uid: $uid/" |
  create_once kn create --field-manager helm -f - >/dev/null
legacy_uids() { kn get deployment/legacy service/legacy configmap/legacy -o jsonpath='{range .items[*]}{.metadata.uid} {end}'; }
legacy_pods() { kn get pods -l app.kubernetes.io/instance=legacy -o jsonpath='{range .items[*]}{.metadata.uid} {end}'; }
kn wait deployment/legacy --for=condition=Available --timeout=60s >/dev/null
# And what helm-operator(-plugins) leaves on the resource: its uninstall
# finalizer, its status (Deployed, no Ready) and a release Secret the
# resource owns.
kn patch hello/legacy --type=merge -p '{"metadata":{"finalizers":["uninstall-helm-release"]}}' >/dev/null
kn patch hello/legacy --subresource=status --type=merge -p '{"status":{"conditions":[
  {"type":"Initialized","status":"True","reason":"","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},
  {"type":"Deployed","status":"True","reason":"InstallSuccessful","message":"release was successfully installed","lastTransitionTime":"2026-01-01T00:00:00Z"}],
  "deployedRelease":{"name":"legacy"}}}' >/dev/null
create_once kn apply -f - >/dev/null <<SECRET
apiVersion: v1
kind: Secret
type: helm.sh/release.v1
metadata:
  name: sh.helm.release.v1.legacy.v1
  labels: {owner: helm, name: legacy, status: deployed, version: "1"}
  ownerReferences: [{apiVersion: charts.example.com/v1, kind: Hello, name: legacy, uid: $uid}]
data: {release: eA==}
SECRET
before_uids=$(legacy_uids)
before_pods=$(legacy_pods)
[ -n "$before_pods" ] || fail "deployment/legacy has no pods"
ok "deployment, service and configmap legacy, pods $before_pods"

step "stencil run --watches: hello/demo and hello/legacy Ready and Deployed"
start_stencil --watches "$CONFIG_DIR/watches.yaml"
create_once kn apply -f - >/dev/null <<'CR'
apiVersion: charts.example.com/v1
kind: Hello
metadata: {name: demo}
spec: {greeting: "hello, world", replicaCount: 2}
CR
kn wait hello/demo hello/legacy --for=condition=Ready --timeout=90s >/dev/null
kn wait hello/demo hello/legacy --for=condition=Deployed --timeout=30s >/dev/null
expect_eq "Deployed reason" "InstallSuccessful" "$(condition hello/demo Deployed reason)"
expect_eq "Deployed message (NOTES.txt)" "hello, world from demo: kubectl --namespace $NS port-forward service/demo 8080:80" "$(condition hello/demo Deployed message)"
expect_eq "status.deployedRelease.name" demo "$(kn get hello/demo -o jsonpath='{.status.deployedRelease.name}')"
expect_eq "the override on the pod template" platform "$(kn get deployment/demo -o jsonpath='{.spec.template.metadata.annotations.team}')"
expect_eq "replicas from the spec" 2 "$(kn get deployment/demo -o jsonpath='{.spec.replicas}')"
if kn get pod demo-test-connection >/dev/null 2>&1; then fail "the chart's test hook was applied"; fi
wait_for 30 "a HooksNotApplied event" has_event HooksNotApplied
expect_eq "HooksNotApplied events for hello/demo's generation 1" 1 \
  "$(kn get events --field-selector reason=HooksNotApplied,involvedObject.name=demo -o jsonpath='{.items[*].count}')"
ok "Ready=True, Deployed=True InstallSuccessful with the NOTES, deployedRelease demo, override and spec applied, test hook not applied"

step "hello/legacy's objects taken over in place"
expect_eq "UIDs of deployment, service, configmap legacy" "$before_uids" "$(legacy_uids)"
# stencil's annotations on the Deployment bump its generation; its pod
# template is the chart's, unchanged, so the pods stay.
kn wait deployment/legacy --for=condition=Available --timeout=60s >/dev/null
expect_eq "deployment/legacy's pods (no restart)" "$before_pods" "$(legacy_pods)"
expect_eq "owner-uid label" "$uid" "$(kn get deployment/legacy -o jsonpath='{.metadata.labels.stencil\.dev/owner-uid}')"
writes=$(metric stencil_child_writes_total)
# demo: 3 creates; legacy: at most one apply of each of its 3 objects.
((writes <= 6)) || fail "stencil_child_writes_total is $writes, want at most 6 (3 creates, 3 takeovers)"
# Taken over, not upgraded; what the way back needs is left as it was.
expect_eq "hello/legacy's Deployed reason" TakeoverSuccessful "$(condition hello/legacy Deployed reason)"
expect_eq "hello/legacy's finalizers" '["uninstall-helm-release"]' "$(kn get hello/legacy -o jsonpath='{.metadata.finalizers}')"
kn get secret/sh.helm.release.v1.legacy.v1 >/dev/null || fail "the release Secret is gone"
ok "same UIDs, same pods, $writes child writes in all; Deployed TakeoverSuccessful; helm-operator's finalizer and release Secret kept"

rvs() { kn get hellos,deployments,services,configmaps -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion} {end}'; }
step "converged: a restart writes nothing"
before=$(rvs)
stop_stencil
start_stencil --watches "$CONFIG_DIR/watches.yaml"
wait_for 30 "both resources reconciled by the new process" metric_at_least stencil_reconcile_total 2
expect_eq "child writes after the restart" 0 "$(metric stencil_child_writes_total)"
expect_eq "status patches after the restart" 0 "$(metric stencil_status_patches_total)"
expect_eq "resourceVersions after the restart" "$before" "$(rvs)"
ok "0 child writes, 0 status patches, no object changed"

step "a value change updates; config.enabled=false prunes the ConfigMap"
kn patch hello/demo --type=merge -p '{"spec":{"greeting":"bonjour"}}' >/dev/null
greeting() { expect_eq "configmap/demo GREETING" bonjour "$(kn get configmap/demo -o jsonpath='{.data.GREETING}')"; }
wait_for 30 "configmap/demo to follow the spec" greeting
kn wait hello/demo --for=condition=Ready --timeout=60s >/dev/null
upgraded() { expect_eq "Deployed reason" UpgradeSuccessful "$(condition hello/demo Deployed reason)"; }
wait_for 30 "Deployed UpgradeSuccessful" upgraded
kn patch hello/demo --type=merge -p '{"spec":{"config":{"enabled":false}}}' >/dev/null
wait_for 30 "configmap/demo to be pruned" gone configmap/demo
no_env_from() { expect_eq "deployment/demo envFrom" "" "$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].envFrom}')"; }
wait_for 30 "deployment/demo without envFrom" no_env_from
kn wait hello/demo --for=condition=Ready --timeout=60s >/dev/null
ok "GREETING bonjour, Deployed UpgradeSuccessful; configmap/demo pruned, deployment/demo without envFrom"

step "hello/legacy deleted: gone with its objects and release Secret, no finalizer removed by hand"
kn delete hello/legacy --wait=false >/dev/null
for o in hello/legacy deployment/legacy service/legacy configmap/legacy secret/sh.helm.release.v1.legacy.v1; do
  wait_for 60 "$o gone" gone "$o"
done
ok "hello/legacy, its Deployment, Service, ConfigMap and release Secret deleted"
fail_if_denied "the chart scenario"
