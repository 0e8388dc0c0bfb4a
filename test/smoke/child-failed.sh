#!/usr/bin/env bash
# A child that fails makes its parent Stalled: a WebApp whose Deployment
# cannot progress (a node selector no node matches, progressDeadlineSeconds
# 10) ends Ready=False reason ChildFailed with Stalled=True and no
# Reconciling, so kstatus (Flux, Helm 4) says Failed: a person must act.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace child-failed
install_crds
copy_config
cat >"$CONFIG_DIR/stencil.yaml" <<'YAML'
resources:
  - group: apps.example.com
    version: v1beta1
    resource: webapps
    templates: [stuck.yaml.tmpl]
    children:
      - {apiVersion: apps/v1, kind: Deployment}
YAML
cat >"$CONFIG_DIR/stuck.yaml.tmpl" <<'TMPL'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name | quote }}
spec:
  replicas: 1
  progressDeadlineSeconds: 10
  selector: {matchLabels: {app: {{ .Name | quote }}}}
  template:
    metadata: {labels: {app: {{ .Name | quote }}}}
    spec:
      nodeSelector: {smoke.stencil.dev/no-such-node: "true"}
      containers: [{name: web, image: {{ .Spec.image | quote }}}]
TMPL
start_stencil --config "$CONFIG_DIR/stencil.yaml"

step "a WebApp whose Deployment cannot schedule its pod passes its progress deadline"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata: {name: stuck}
spec: {image: registry.k8s.io/pause:3.10}
YAML
deadline_exceeded() {
  local got
  got=$(kn get deployment/stuck -o jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}')
  [ "$got" = ProgressDeadlineExceeded ] || { echo "deployment/stuck Progressing reason is '$got'"; return 1; }
}
wait_for 90 "deployment/stuck to pass its progress deadline" deadline_exceeded
ok "deployment/stuck: ProgressDeadlineExceeded"

step "the WebApp says Ready=False ChildFailed, Stalled=True, no Reconciling"
wait_for 60 "webapp/stuck Ready=False ChildFailed" expect_ready_reason webapp/stuck "False ChildFailed"
stalled() {
  local got
  got="$(condition webapp/stuck Stalled status) $(condition webapp/stuck Stalled reason)"
  [ "$got" = "True ChildFailed" ] || { echo "Stalled is '$got', want 'True ChildFailed'"; return 1; }
}
wait_for 30 "webapp/stuck Stalled=True ChildFailed" stalled
expect_eq "webapp/stuck Reconciling" "" "$(condition webapp/stuck Reconciling status)"
ok "Ready: $(condition webapp/stuck Ready message)"

# kstatus's rule (sigs.k8s.io/cli-utils/pkg/kstatus, status.Compute): a
# resource whose status observed its generation and whose Stalled condition
# is True is Failed. The smoke tools carry no kstatus command, so the rule is
# checked here; the unit test TestChildFailedIsFailedForKstatus runs kstatus
# itself on the status stencil computes.
step "kstatus says Failed: observedGeneration current and Stalled=True"
expect_eq "webapp/stuck status.observedGeneration" \
  "$(kn get webapp/stuck -o jsonpath='{.metadata.generation}')" \
  "$(kn get webapp/stuck -o jsonpath='{.status.observedGeneration}')"
ok "kstatus Failed"
