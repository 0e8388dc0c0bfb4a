#!/usr/bin/env bash
# A refused reload writes nothing, with --manage-crds too. stencil runs
# --manage-crds as a ServiceAccount bound to exactly what `stencil rbac
# --manage-crds` printed for a config whose Gizmo entry generates its CRD
# and renders a Deployment. The config then gains a schema field and a
# ConfigMap child, which stencil may not write: the reload is refused
# naming configmaps, and the Gizmo CRD is left exactly as it was (the same
# resourceVersion: the CRD's writes come after the access check, not
# before). The running config keeps serving; once the new `stencil rbac
# --manage-crds` output is applied, the poll takes the same config and the
# CRD gains the field.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace reloadcrds
crd=gizmos.snap.example.com
defer "$KUBECTL" delete crd "$crd" --ignore-not-found --wait=false
CONFIG_DIR=$(mktemp -d)
defer rm -rf "$CONFIG_DIR"
cfg="$CONFIG_DIR/stencil.yaml"
mkdir -p "$CONFIG_DIR/gizmo"
cat >"$cfg" <<'EOF'
resources:
  - group: snap.example.com
    version: v1
    resource: gizmos
    kind: Gizmo
    schema:
      spec:
        image: string | required=true minLength=1
    templates: [gizmo/deployment.yaml.tmpl]
    children:
      - {apiVersion: apps/v1, kind: Deployment}
EOF
cat >"$CONFIG_DIR/gizmo/deployment.yaml.tmpl" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name | quote }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Name | quote }}}
  template:
    metadata:
      labels: {app: {{ .Name | quote }}}
    spec:
      containers:
        - name: main
          image: {{ .Spec.image | quote }}
EOF
cat >"$CONFIG_DIR/gizmo/configmap.yaml.tmpl" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-size" .Name | quote }}
data:
  size: {{ get .Spec "size" "medium" | quote }}
EOF
role="stencil-smoke-$NS"
user="system:serviceaccount:$NS:stencil"
defer "$KUBECTL" delete clusterrolebinding,clusterrole "$role" --ignore-not-found

# grant CONFIG makes the ClusterRole exactly the first document of
# `stencil rbac --manage-crds --config CONFIG`.
grant() {
  "$STENCIL" rbac --manage-crds --config "$1" | awk '/^---/ { exit } { print }' |
    sed -E "0,/^  name: .*/s//  name: $role/" | create_once k apply -f - >/dev/null
}

step "stencil runs --manage-crds as $user, bound to what stencil rbac --manage-crds printed"
create_once kn create serviceaccount stencil >/dev/null
grant "$cfg"
create_once k create clusterrolebinding "$role" --clusterrole="$role" --serviceaccount="$NS:stencil" >/dev/null
expect_eq "can $user create configmaps" no "$(k auth can-i create configmaps -n "$NS" --as "$user" || true)"
kubeconfig_sa=$(mktemp)
defer rm -f "$kubeconfig_sa"
k config view --raw --flatten | sed "s/^  user:\$/  user:\n    as: $user/" >"$kubeconfig_sa"
# The CRD is new: until the API server's owner-reference admission maps
# its kind, a child's apply is refused with "forbidden: cannot set
# blockOwnerDeletion ... cannot find RESTMapping" and retried. Not an RBAC
# denial, so the log's "forbidden" does not fail the scenario here; Ready
# below needs every write to have gone through.
STENCIL_LOG_DENIED_OK=1
start_stencil --config "$cfg" --kubeconfig "$kubeconfig_sa" --manage-crds --config-poll 1s
k wait --for condition=Established --timeout 60s "crd/$crd" >/dev/null
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: snap.example.com/v1
kind: Gizmo
metadata:
  name: g
spec:
  image: registry.k8s.io/pause:3.10
YAML
wait_for 90 "gizmo/g Ready=True" expect_ready_reason gizmo/g "True AllChildrenReady"
ok "the Gizmo CRD created by stencil; gizmo/g Ready"

step "the config gains a schema field and a ConfigMap child: refused, the CRD untouched"
before=$(k get crd "$crd" -o jsonpath='{.metadata.resourceVersion} {.metadata.generation}')
sed -i 's#^        image: string | required=true minLength=1$#&\n        size: string | enum="small,medium,large"#' "$cfg"
sed -i 's#^    templates: \[gizmo/deployment.yaml.tmpl\]$#    templates: [gizmo/deployment.yaml.tmpl, gizmo/configmap.yaml.tmpl]#' "$cfg"
sed -i 's#^      - {apiVersion: apps/v1, kind: Deployment}$#&\n      - {apiVersion: v1, kind: ConfigMap}#' "$cfg"
if ! grep -q 'size: string' "$cfg" || ! grep -q 'kind: ConfigMap' "$cfg"; then fail "could not edit the config"; fi
"$STENCIL" validate --config "$cfg" >/dev/null || fail "the new config does not validate"
refused() { [ "$(metric stencil_config_last_reload_successful)" = 0 ]; }
wait_for 60 "stencil_config_last_reload_successful 0" refused
line=$(grep -i 'reload rejected' "$STENCIL_LOG" | tail -n 1)
[[ "$line" == *configmaps* ]] || fail "the refusal does not name configmaps: ${line:0:600}"
after=$(k get crd "$crd" -o jsonpath='{.metadata.resourceVersion} {.metadata.generation}')
expect_eq "the Gizmo CRD's resourceVersion and generation after the refused reload" "$before" "$after"
[ -z "$(k get crd "$crd" -o jsonpath='{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.type}')" ] ||
  fail "the refused reload added spec.size to the CRD"
kn patch gizmo/g --type merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
image_is() { [ "$(kn get deployment/g -o jsonpath='{.spec.template.spec.containers[0].image}')" = "$1" ]; }
wait_for 60 "the spec edit to reach deployment/g under the running config" image_is registry.k8s.io/pause:3.9
ok "refused (${line:0:200}); CRD resourceVersion/generation $after as before; the running config serves"

step "with the new stencil rbac --manage-crds output applied, the poll takes the same config"
grant "$cfg"
taken() { [ "$(metric stencil_config_last_reload_successful)" = 1 ]; }
wait_for 60 "stencil_config_last_reload_successful 1" taken
has_size() { [ "$(k get crd "$crd" -o jsonpath='{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.size.type}')" = string ]; }
wait_for 30 "the CRD with spec.size" has_size
has_cm() { kn get configmap/g-size -o name >/dev/null 2>&1; }
wait_for 60 "configmap/g-size" has_cm
ok "taken: the CRD has spec.size, configmap/g-size created"
