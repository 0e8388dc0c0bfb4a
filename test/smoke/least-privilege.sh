#!/usr/bin/env bash
# stencil needs no more than the ClusterRole in deploy/ (what `stencil rbac`
# prints), proven by the API server's own RBAC authorizer: the controller runs
# with a kubeconfig that impersonates a ServiceAccount bound only to that
# ClusterRole, with leader election on, and still creates children, patches
# status, records events and prunes. STENCIL_SMOKE_CLUSTERROLE names another
# ClusterRole file to try instead (to show that a missing rule fails): the
# lib's waits fail as soon as the controller logs "forbidden"
# (STENCIL_SMOKE_ROLE likewise for the Lease Role of deploy/base/role.yaml). The
# plane runs the OwnerReferencesPermissionEnforcement admission plugin, as
# OpenShift does, so blockOwnerDeletion needs the finalizers rule. The config is
# crds/stencil.yaml, which the Deployment in deploy/ mounts (deploy/manifests.yaml,
# the output of stencil manifests).
# Last, the same identity runs a ring member (--ring), which also lists and
# watches the namespaces it divides.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace leastpriv
install_crds
role_file=${STENCIL_SMOKE_CLUSTERROLE:-$smoke_root/deploy/base/clusterrole.yaml}
lease_role_file=${STENCIL_SMOKE_ROLE:-$smoke_root/deploy/base/role.yaml}
role="stencil-smoke-$NS"
user="system:serviceaccount:$NS:stencil"

# The ClusterRole and its binding are cluster-wide: named after the namespace
# and deleted on exit like it.
defer "$KUBECTL" delete clusterrolebinding,clusterrole "$role" --ignore-not-found

step "a ServiceAccount bound to the ClusterRole of $(basename "$role_file") only"
create_once kn create serviceaccount stencil >/dev/null
sed -E "0,/^  name: .*/s//  name: $role/" "$role_file" | create_once k apply -f - >/dev/null
create_once k create clusterrolebinding "$role" --clusterrole="$role" --serviceaccount="$NS:stencil" >/dev/null
# The Lease Role of deploy/base/role.yaml, in the namespace of the Lease.
create_once kn apply -f "$lease_role_file" >/dev/null
create_once kn create rolebinding stencil-leader-election --role=stencil-leader-election --serviceaccount="$NS:stencil" >/dev/null
expect_eq "can $user update webapps" no "$(k auth can-i update webapps.apps.example.com -n "$NS" --as "$user" || true)"
expect_eq "can $user read secrets" no "$(k auth can-i get secrets -n "$NS" --as "$user" || true)"
ok "$user may not update webapps nor read secrets (what it may do, the run below shows)"

step "stencil runs as $user with leader election"
kubeconfig_sa=$(mktemp)
defer rm -f "$kubeconfig_sa"
# The admin's kubeconfig with "as:" added to its user: every request is
# authorized as the ServiceAccount (impersonation).
k config view --raw --flatten | sed "s/^  user:\$/  user:\n    as: $user/" >"$kubeconfig_sa"
expect_eq "whoami through the kubeconfig" "$user" \
  "$("$KUBECTL" --kubeconfig "$kubeconfig_sa" auth whoami -o jsonpath='{.status.userInfo.username}')"
start_stencil --config "$smoke_root/crds/stencil.yaml" --kubeconfig "$kubeconfig_sa" \
  --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-smoke
lease_held() { [ -n "$(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}')" ]; }
wait_for 30 "the Lease to be held" lease_held
ok "lease/stencil-smoke held by $(kn get lease stencil-smoke -o jsonpath='{.spec.holderIdentity}')"

step "create: the samples get their children and become Ready=True"
create_once kn apply -f "$smoke_root/crds/samples/" >/dev/null
wait_for 90 "webapp/demo Ready=True" expect_ready_reason webapp/demo "True AllChildrenReady"
wait_for 90 "memcached/cache Ready=True" expect_ready_reason memcached/cache "True AllChildrenReady"
# The AppStack's app waits for its database, then reads its Service.
wait_for 120 "appstack/shop Ready=True" expect_ready_reason appstack/shop "True AllChildrenReady"
# The Hello is served by a chart (chart mode).
wait_for 90 "hello/hello Ready=True" expect_ready_reason hello/hello "True AllChildrenReady"
for child in deployment/demo service/demo deployment/cache; do kn get "$child" >/dev/null; done
wait_for 30 "Created events" has_event Created
ok "webapp/demo, memcached/cache, appstack/shop and hello/hello Ready=True; deployment/demo, service/demo, deployment/cache exist; Created events recorded"

step "prune: with the Service template dropped from the config, service/demo is deleted"
stop_stencil
CONFIG_DIR=$(mktemp -d)
cp -r "$smoke_root"/crds/stencil.yaml "$smoke_root"/crds/webapp "$smoke_root"/crds/memcached "$smoke_root"/crds/appstack "$smoke_root"/crds/charts "$CONFIG_DIR/"
sed -i '/webapp\/service.yaml.tmpl/d' "$CONFIG_DIR/stencil.yaml"
start_stencil --config "$CONFIG_DIR/stencil.yaml" --kubeconfig "$kubeconfig_sa" \
  --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-smoke
wait_for 60 "service/demo to be pruned" gone service/demo
wait_for 30 "a Pruned event" has_event Pruned
kn get deployment/demo >/dev/null
ok "service/demo pruned, deployment/demo kept, Pruned event recorded"

step "the controller log has no authorization errors"
stop_stencil
if grep -iE 'forbidden|cannot (get|list|watch|create|patch|update|delete)' "$STENCIL_LOG"; then
  fail "stencil logged authorization errors (above)"
fi
expect_eq "exit status after SIGTERM (Lease released)" 0 "$STENCIL_RC"
ok "no 'forbidden' in $STENCIL_LOG, through shutdown"

step "stencil runs as $user as a ring member (--ring): it lists the namespaces it divides, and serves"
start_stencil --config "$CONFIG_DIR/stencil.yaml" --kubeconfig "$kubeconfig_sa" \
  --ring smoke --leader-elect-namespace "$NS"
kn patch webapp demo --type merge -p '{"spec":{"image":"registry.k8s.io/pause:ring"}}' >/dev/null
demo_image() { [ "$(kn get deployment demo -o jsonpath='{.spec.template.spec.containers[0].image}')" = registry.k8s.io/pause:ring ]; }
wait_for 60 "the ring member to apply webapp/demo's new image" demo_image
stop_stencil
if grep -iE 'forbidden|cannot (get|list|watch|create|patch|update|delete)' "$STENCIL_LOG"; then
  fail "the ring member logged authorization errors (above)"
fi
expect_eq "the ring member's exit status after SIGTERM (its Lease deleted)" 0 "$STENCIL_RC"
ok "as a ring member of one: webapp/demo's edit applied, no 'forbidden', exit 0"

step "kubectl apply -k deploy/ --dry-run=server is accepted"
# A server-side dry run creates nothing, so the namespaced objects need
# stencil-system to exist already; it is made here (and removed) if absent.
if ! k get namespace stencil-system >/dev/null 2>&1; then
  create_once k create namespace stencil-system >/dev/null
  defer "$KUBECTL" delete namespace stencil-system --wait=false
fi
out=$(k apply -k "$smoke_root/deploy/" --dry-run=server 2>&1) || fail "apply -k deploy/ --dry-run=server: $out"
while IFS= read -r line; do echo "[$SCENARIO]   $line"; done <<<"$out"
ok "deploy/ passes the API server's validation ($(wc -l <<<"$out") objects)"
