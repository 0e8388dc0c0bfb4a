#!/usr/bin/env bash
# A config that lists a cluster-scoped child kind, or a kind that grants
# permissions without allowPermissionGrants, is refused by stencil validate
# (exit 2, naming file, entry and field) and by stencil run, before touching
# the cluster; with allowPermissionGrants, validate passes with a warning.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace refused
copy_config
cfg="$CONFIG_DIR/stencil.yaml"
with_child() {
  cat >"$cfg" <<YAML
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [webapp/deployment.yaml.tmpl]
$1
    children:
      - {apiVersion: apps/v1, kind: Deployment}
      - $2
YAML
}
validate() {
  local rc=0
  OUT=$("$STENCIL" validate --config "$cfg" 2>&1) || rc=$?
  echo "$rc"
}

step "a cluster-scoped kind (ClusterRoleBinding) is refused"
with_child "" "{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding}"
expect_eq "stencil validate exit status" 2 "$(validate)"
OUT=$("$STENCIL" validate --config "$cfg" 2>&1 || true)
[[ "$OUT" == *"stencil.yaml: resources[0] (webapps.v1beta1.apps.example.com): children[1]: ClusterRoleBinding.rbac.authorization.k8s.io is cluster-scoped"* ]] ||
  fail "unexpected message: $OUT"
rc=0
"$STENCIL" run --config "$cfg" --namespace "$NS" --kubeconfig "$KUBECONFIG" --metrics-bind-address "" --health-probe-bind-address "" >/dev/null 2>&1 || rc=$?
expect_eq "stencil run exit status" 2 "$rc"
ok "exit 2: $OUT"

step "a RoleBinding is refused without allowPermissionGrants"
with_child "" "{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}"
expect_eq "stencil validate exit status" 2 "$(validate)"
OUT=$("$STENCIL" validate --config "$cfg" 2>&1 || true)
[[ "$OUT" == *"children[1]: RoleBinding.rbac.authorization.k8s.io grants permissions"*"allowPermissionGrants: true"* ]] || fail "unexpected message: $OUT"
ok "exit 2: $OUT"

step "with allowPermissionGrants: true it passes, with a warning"
with_child "    allowPermissionGrants: true" "{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding}"
expect_eq "stencil validate exit status" 0 "$(validate)"
OUT=$("$STENCIL" validate --config "$cfg" 2>&1)
[[ "$OUT" == *"warning: "*"RoleBinding.rbac.authorization.k8s.io grants permissions"* ]] || fail "no warning: $OUT"
ok "exit 0: $(head -1 <<<"$OUT")"
