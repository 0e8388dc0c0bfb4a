#!/usr/bin/env bash
# A config entry that renders a StatefulSet (and its headless Service): the
# resource's readiness follows the StatefulSet's pods, from kstatus, and
# its status sums their replicas.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace statefulset
install_crds
copy_config
cat >"$CONFIG_DIR/stencil.yaml" <<'YAML'
resources:
  - group: cache.example.com
    version: v1alpha1
    resource: memcacheds
    templates: [statefulset.yaml.tmpl]
    children:
      - {apiVersion: apps/v1, kind: StatefulSet}
      - {apiVersion: v1, kind: Service}
YAML
cat >"$CONFIG_DIR/statefulset.yaml.tmpl" <<'TMPL'
apiVersion: v1
kind: Service
metadata:
  name: {{ .Name | quote }}
spec:
  clusterIP: None
  selector: {app: {{ .Name | quote }}}
  ports: [{name: memcached, port: 11211}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name | quote }}
spec:
  serviceName: {{ .Name | quote }}
  replicas: {{ get .Spec "size" 1 | int64 }}
  selector: {matchLabels: {app: {{ .Name | quote }}}}
  template:
    metadata: {labels: {app: {{ .Name | quote }}}}
    spec:
      containers: [{name: memcached, image: {{ get .Spec "image" "memcached:1.6" | quote }}}]
TMPL
start_stencil --config "$CONFIG_DIR/stencil.yaml"

step "a Memcached of size 3 renders a StatefulSet; Ready once its 3 pods are"
create_once kn apply -f - >/dev/null <<'YAML'
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: cache}
spec: {size: 3}
YAML
kn wait memcached/cache --for=condition=Ready --timeout=120s >/dev/null
expect_eq "statefulset/cache readyReplicas" 3 "$(kn get statefulset/cache -o jsonpath='{.status.readyReplicas}')"
expect_eq "memcached/cache status.readyReplicas" 3 "$(kn get memcached/cache -o jsonpath='{.status.readyReplicas}')"
ok "memcached/cache Ready with readyReplicas 3 of $(kn get memcached/cache -o jsonpath='{.status.replicas}')"

step "scaled to 5: not Ready until the new pods are"
kn patch memcached/cache --type merge -p '{"spec":{"size":5}}' >/dev/null
gen=$(kn get memcached/cache -o jsonpath='{.metadata.generation}')
seen_gen() { [ "$(kn get memcached/cache -o jsonpath='{.status.observedGeneration}')" = "$gen" ]; }
wait_for 30 "memcached/cache to observe generation $gen" seen_gen
kn wait memcached/cache --for=condition=Ready --timeout=120s >/dev/null
expect_eq "memcached/cache status.readyReplicas" 5 "$(kn get memcached/cache -o jsonpath='{.status.readyReplicas}')"
expect_eq "statefulset/cache readyReplicas" 5 "$(kn get statefulset/cache -o jsonpath='{.status.readyReplicas}')"
ok "Ready again at generation $gen with 5 ready replicas"
