#!/usr/bin/env bash
# A tenant (a ServiceAccount that may create WebApps, and nothing else)
# tries to change the shape of the children through its spec, against
# templates written as most charts are: values printed without quote, in
# plain, quoted, flow, block-scalar and comment positions, with helpers
# included through nindent. Every string must land as exactly one value in
# its one field: no privileged container, no second container, no extra
# key, label or annotation, no smuggled object; NO, on and 1.20 reach the
# cluster as strings.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace tenant
install_crds
copy_config
cat >"$CONFIG_DIR/webapp/_helpers.tpl" <<'EOF'
{{- define "webapp.selector" -}}
app.kubernetes.io/name: webapp
app.kubernetes.io/instance: {{ .Name }}
{{- end }}
{{- define "webapp.labels" -}}
{{ include "webapp.selector" . }}
tier: {{ get .Spec.config "tier" "web" }}
{{- end }}
EOF
cat >"$CONFIG_DIR/webapp/deployment.yaml.tmpl" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
  labels:
    {{- include "webapp.labels" . | nindent 4 }}
  annotations:
    # owner: {{ get .Spec.config "owner" "nobody" }}
    note: {{ get .Spec.config "note" "none" }}
spec:
  replicas: 1
  selector:
    matchLabels:
      {{- include "webapp.selector" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "webapp.selector" . | nindent 8 }}
    spec:
      containers:
        - {name: web, image: {{ .Spec.image }}, env: [{name: REGION, value: {{ get .Spec.config "region" "eu" }}}, {name: GREETING, value: "{{ get .Spec.config "greeting" "hi" }}"}]}
EOF
cat >"$CONFIG_DIR/webapp/configmap.yaml.tmpl" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Name }}-config
data:
  {{- range $k, $v := .Spec.config }}
  {{ $k }}: {{ $v }}
  {{- end }}
  run.sh: |
{{ get .Spec.config "script" "true" | indent 4 }}
EOF
sed -i 's#^    statusTemplate: webapp/status.yaml.tmpl#&\n    helpers: [webapp/_helpers.tpl]#' "$CONFIG_DIR/stencil.yaml"
grep -q 'helpers: \[webapp/_helpers.tpl\]' "$CONFIG_DIR/stencil.yaml" || fail "could not add helpers to $CONFIG_DIR/stencil.yaml"
"$STENCIL" validate --config "$CONFIG_DIR/stencil.yaml" >/dev/null || fail "stencil validate refused the chart-style templates"
start_stencil --config "$CONFIG_DIR/stencil.yaml"

step "the tenant may create WebApps, and nothing else"
tenant=system:serviceaccount:$NS:tenant
create_once kn create serviceaccount tenant >/dev/null
create_once kn create role webapp-author --verb=get,list,watch,create,update,patch --resource=webapps.apps.example.com >/dev/null
create_once kn create rolebinding webapp-author --role=webapp-author --serviceaccount="$NS:tenant" >/dev/null
expect_eq "tenant may create webapps" yes "$(kn auth can-i create webapps.apps.example.com --as="$tenant" 2>/dev/null || true)"
expect_eq "tenant may create pods" no "$(kn auth can-i create pods --as="$tenant" 2>/dev/null || true)"
expect_eq "tenant may create configmaps" no "$(kn auth can-i create configmaps --as="$tenant" 2>/dev/null || true)"
ok "RBAC: webapps yes, pods no, configmaps no"

step "the tenant creates a hostile WebApp"
image='registry.k8s.io/pause:3.10, securityContext: {privileged: true}'
note=$'x\nhostNetwork: true\n  paused: true'
owner=$'me\n  evil: yes'
greeting='hi" , securityContext: {privileged: true}, x: "'
mode=$'x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: smuggled}'
script=$'echo hi\nhostNetwork: true\n'
tier=$'web\nprivileged: "true"'
# json_str prints $1 as a JSON string.
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}
create_once kn --as="$tenant" apply -f - >/dev/null <<JSON
{"apiVersion": "apps.example.com/v1beta1", "kind": "WebApp", "metadata": {"name": "hostile"},
 "spec": {"image": $(json_str "$image"), "config": {"region": "NO", "version": "1.20", "enabled": "on",
   "note": $(json_str "$note"), "owner": $(json_str "$owner"), "greeting": $(json_str "$greeting"),
   "mode": $(json_str "$mode"), "script": $(json_str "$script"), "tier": "web"}}}
JSON
expect_eq "spec.config.note as stored" "$note" "$(kn get webapp/hostile -o jsonpath='{.spec.config.note}')"
expect_eq "spec.config.mode as stored" "$mode" "$(kn get webapp/hostile -o jsonpath='{.spec.config.mode}')"
expect_eq "spec.image as stored" "$image" "$(kn get webapp/hostile -o jsonpath='{.spec.image}')"
has_children() { kn get deployment/hostile configmap/hostile-config -o name >/dev/null 2>&1; }
wait_for 60 "the Deployment and the ConfigMap" has_children
ok "created by $tenant; stencil rendered its children"

step "every string landed in its one field"
d=deployment/hostile
expect_eq "containers" "web" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[*].name}')"
expect_eq "the image" "$image" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[0].image}')"
expect_eq "container securityContext" "" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[0].securityContext}')"
expect_eq "pod hostNetwork" "" "$(kn get "$d" -o jsonpath='{.spec.template.spec.hostNetwork}')"
expect_eq "spec.paused" "" "$(kn get "$d" -o jsonpath='{.spec.paused}')"
expect_eq "env names" "REGION GREETING" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[0].env[*].name}')"
expect_eq "REGION (NO stays a string)" "NO" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[0].env[0].value}')"
expect_eq "GREETING" "$greeting" "$(kn get "$d" -o jsonpath='{.spec.template.spec.containers[0].env[1].value}')"
expect_eq "annotation note" "$note" "$(kn get "$d" -o jsonpath='{.metadata.annotations.note}')"
keys() { kn get "$1" -o go-template="{{range \$k, \$v := $2}}{{\$k}} {{end}}"; }
expect_eq "annotation keys" "deployment.kubernetes.io/revision note stencil.dev/applied-hash " "$(keys "$d" .metadata.annotations)"
expect_eq "label keys" "app.kubernetes.io/instance app.kubernetes.io/managed-by app.kubernetes.io/name stencil.dev/owner-uid tier " "$(keys "$d" .metadata.labels)"
expect_eq "pod label keys" "app.kubernetes.io/instance app.kubernetes.io/name " "$(keys "$d" .spec.template.metadata.labels)"
c=configmap/hostile-config
expect_eq "ConfigMap keys" "enabled greeting mode note owner region run.sh script tier version " "$(keys "$c" .data)"
expect_eq "data.version (1.20 stays a string)" "1.20" "$(kn get "$c" -o jsonpath='{.data.version}')"
expect_eq "data.enabled (on stays a string)" "on" "$(kn get "$c" -o jsonpath='{.data.enabled}')"
expect_eq "data.mode" "$mode" "$(kn get "$c" -o jsonpath='{.data.mode}')"
expect_eq "data.owner" "$owner" "$(kn get "$c" -o jsonpath='{.data.owner}')"
expect_eq "data.run.sh (a block scalar)" "${script%$'\n'}" "$(kn get "$c" -o go-template='{{index .data "run.sh"}}')"
gone configmap/smuggled >/dev/null || fail "configmap/smuggled exists: an object was smuggled in through spec.config.mode"
privileged=$(kn get pods -o jsonpath='{range .items[*]}{.spec.containers[*].securityContext.privileged}{end}')
expect_eq "privileged containers in $NS" "" "$privileged"
ok "one container, no securityContext, no hostNetwork, no extra key; NO, on and 1.20 are strings; no smuggled ConfigMap"

step "a tenant's label value that is not a valid label is refused, naming it"
kn --as="$tenant" patch webapp/hostile --type=merge -p "{\"spec\":{\"config\":{\"tier\":$(json_str "$tier")}}}" >/dev/null
wait_for 30 "Ready=False RenderFailed" expect_ready_reason webapp/hostile "False RenderFailed"
msg=$(condition webapp/hostile Ready message)
[[ "$msg" == *'label tier='* ]] || fail "message '$msg' does not name the label"
expect_eq "label tier is still" web "$(kn get "$d" -o jsonpath='{.metadata.labels.tier}')"
ok "RenderFailed: $msg"
