#!/usr/bin/env bash
# A spec the template cannot render gives Ready=False RenderFailed naming the
# template and line, a Warning event and no retry storm; fixing the spec
# recovers. The template here is the example's with a common mistake: it
# reads .Spec.replicas directly, so a WebApp without replicas fails
# (missingkey=error) instead of rendering "<no value>".
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace renderfail
install_crds
copy_config
tmpl="$CONFIG_DIR/webapp/deployment.yaml.tmpl"
sed -i 's/{{- if and (hasKey .Spec "replicas") (not (hasKey .Spec "autoscale")) }}/{{- if true }}/; s/{{ .Spec.replicas | int64 }}/{{ .Spec.replicas }}/' "$tmpl"
grep -q 'replicas: {{ .Spec.replicas }}' "$tmpl" || fail "could not edit $tmpl"
line=$(grep -n 'replicas: {{ .Spec.replicas }}' "$tmpl" | cut -d: -f1)
start_stencil --config "$CONFIG_DIR/stencil.yaml"

step "a WebApp without spec.replicas fails to render"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: broken
spec:
  image: registry.k8s.io/pause:3.10
YAML
wait_for 30 "Ready=False RenderFailed" expect_ready_reason webapp/broken "False RenderFailed"
msg=$(condition webapp/broken Ready message)
[[ "$msg" == *"webapp/deployment.yaml.tmpl:$line"* && "$msg" == *replicas* ]] ||
  fail "message '$msg' does not name webapp/deployment.yaml.tmpl:$line and replicas"
expect_eq "phase" Degraded "$(kn get webapp/broken -o jsonpath='{.status.phase}')"
expect_eq "Stalled" "True RenderFailed" "$(condition webapp/broken Stalled status) $(condition webapp/broken Stalled reason)"
expect_eq "Reconciling while stalled" "" "$(condition webapp/broken Reconciling status)"
wait_for 30 "a Warning RenderFailed event" has_event RenderFailed
gone deployment/broken >/dev/null || fail "deployment/broken exists although the render failed"
ok "Ready=False RenderFailed and Stalled=True RenderFailed: $msg"

step "no retry storm: the failure is not retried while the WebApp is unchanged"
errors_then=$(metric stencil_render_errors_total)
# Let time pass doing real work: a second WebApp is created and becomes Ready.
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata:
  name: fine
spec:
  image: registry.k8s.io/pause:3.10
  replicas: 1
YAML
kn wait webapp/fine --for=condition=Ready --timeout=60s >/dev/null
errors_now=$(metric stencil_render_errors_total)
retries=$(metric workqueue_retries_total)
((errors_now <= 2)) || fail "stencil_render_errors_total is $errors_now, want at most 2 (a retry storm?)"
expect_eq "stencil_render_errors_total while another WebApp converged" "$errors_then" "$errors_now"
ok "stencil_render_errors_total $errors_now (unchanged while webapp/fine converged), workqueue_retries_total $retries"

step "setting spec.replicas recovers"
kn patch webapp/broken --type=merge -p '{"spec":{"replicas":1}}' >/dev/null
kn wait webapp/broken --for=condition=Ready --timeout=60s >/dev/null
expect_eq "deployment/broken replicas" 1 "$(kn get deployment/broken -o jsonpath='{.spec.replicas}')"
expect_eq "Stalled once fixed" "" "$(condition webapp/broken Stalled status)"
ok "webapp/broken Ready=True, Stalled gone, with deployment/broken at 1 replica"
