#!/usr/bin/env bash
# A reload that adds a child kind stencil may not write is refused whole.
# stencil runs as a ServiceAccount bound to exactly what `stencil rbac`
# printed for its config (Deployments and Services); the config then gains a
# ConfigMap child. The reload is refused naming configmaps and the verbs
# stencil lacks (asked of the API server before anything starts), the running
# config keeps serving (the resource stays Ready, a spec edit still reaches
# its Deployment) and no ConfigMap write is attempted. Once the new
# `stencil rbac` output is applied, the poll tries the same config again
# (a refusal for RBAC is retried every 30 s) and creates the ConfigMap.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace reloadrbac
install_crds
copy_config
cfg="$CONFIG_DIR/stencil.yaml"
# webapps with a Deployment and a Service only; memcacheds as they are.
cat >"$cfg" <<'EOF'
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates:
      - webapp/deployment.yaml.tmpl
      - webapp/service.yaml.tmpl
    statusTemplate: webapp/status.yaml.tmpl
    children:
      - {apiVersion: apps/v1, kind: Deployment}
      - {apiVersion: v1, kind: Service}
EOF
role="stencil-smoke-$NS"
user="system:serviceaccount:$NS:stencil"
defer "$KUBECTL" delete clusterrolebinding,clusterrole "$role" --ignore-not-found

# grant CONFIG makes the ClusterRole exactly the first document of
# `stencil rbac --config CONFIG`.
grant() {
  "$STENCIL" rbac --config "$1" | awk '/^---/ { exit } { print }' |
    sed -E "0,/^  name: .*/s//  name: $role/" | create_once k apply -f - >/dev/null
}

step "stencil runs as $user, bound to what stencil rbac printed"
create_once kn create serviceaccount stencil >/dev/null
grant "$cfg"
create_once k create clusterrolebinding "$role" --clusterrole="$role" --serviceaccount="$NS:stencil" >/dev/null
expect_eq "can $user create configmaps" no "$(k auth can-i create configmaps -n "$NS" --as "$user" || true)"
kubeconfig_sa=$(mktemp)
defer rm -f "$kubeconfig_sa"
k config view --raw --flatten | sed "s/^  user:\$/  user:\n    as: $user/" >"$kubeconfig_sa"
start_stencil --config "$cfg" --kubeconfig "$kubeconfig_sa"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: demo
spec:
  image: registry.k8s.io/pause:3.10
  replicas: 1
  config: {greeting: hello}
YAML
wait_for 90 "webapp/demo Ready=True" expect_ready_reason webapp/demo "True AllChildrenReady"
ok "webapp/demo Ready with a Deployment and a Service; $user may not create configmaps"

step "the config gains a ConfigMap child: the reload is refused, naming configmaps"
cat >>"$cfg" <<'EOF'
      - {apiVersion: v1, kind: ConfigMap}
EOF
sed -i 's#^      - webapp/service.yaml.tmpl#&\n      - webapp/configmap.yaml.tmpl#' "$cfg"
"$STENCIL" validate --config "$cfg" >/dev/null || fail "the new config does not validate"
# From here the controller's log holds the refusal, which names the denial.
STENCIL_LOG_DENIED_OK=1
kill -HUP "$STENCIL_PID"
refused() { [ "$(metric stencil_config_last_reload_successful)" = 0 ]; }
wait_for 60 "stencil_config_last_reload_successful 0" refused
line=$(grep -i 'reload rejected' "$STENCIL_LOG" | tail -n 1)
[[ "$line" == *"create, patch, delete configmaps"* ]] || fail "the refusal does not name configmaps and the verbs: ${line:0:600}"
ok "refused: ${line:0:400}"

step "the running config keeps serving"
expect_eq "webapp/demo Ready" "True AllChildrenReady" "$(ready_reason webapp/demo)"
kn patch webapp/demo --type=merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
image_is() { [ "$(kn get deployment/demo -o jsonpath='{.spec.template.spec.containers[0].image}')" = "$1" ]; }
wait_for 60 "the spec edit to reach deployment/demo" image_is registry.k8s.io/pause:3.9
gone configmap/demo-config >/dev/null || fail "configmap/demo-config exists after a refused reload"
writes=$(scrape_metrics | awk '/^stencil_child_writes_total\{/ && /kind="ConfigMap"/ { s += $NF } END { printf "%d", s }')
expect_eq "stencil_child_writes_total for ConfigMaps after the refused reload" 0 "$writes"
ok "Ready, the image edit reached deployment/demo, no ConfigMap, no ConfigMap write"

step "with the new stencil rbac output applied, the poll takes the same config (no edit, no SIGHUP)"
grant "$cfg"
expect_eq "can $user create configmaps" yes "$(k auth can-i create configmaps -n "$NS" --as "$user" || true)"
granted=$SECONDS
taken() { [ "$(metric stencil_config_last_reload_successful)" = 1 ]; }
# A refusal for RBAC is tried again every 30 s (reload.RetryDenied).
wait_for 60 "stencil_config_last_reload_successful 1" taken
has_cm() { kn get configmap/demo-config -o name >/dev/null 2>&1; }
wait_for 60 "configmap/demo-config" has_cm
expect_eq "configmap/demo-config data.greeting" hello "$(kn get configmap/demo-config -o jsonpath='{.data.greeting}')"
ok "reload taken by the poll $((SECONDS - granted)) s after the grant; configmap/demo-config created"
