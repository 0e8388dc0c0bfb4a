#!/usr/bin/env bash
# Starts a local Kubernetes control plane on loopback: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok, which makes fake Nodes
# report Ready and pods bound to them Running and Ready. Returns once the API
# is ready, every fake node is Ready and the default ServiceAccount exists, so
# pods can be created straight away. Idempotent: a plane that is already up
# is left alone. Admin kubeconfig: $CLUSTER_DIR/kubeconfig. Stop it with
# test/cluster/down.sh. Ports and paths: see env.sh.
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"

start=$(now)

command -v openssl >/dev/null ||
  { echo "cluster: openssl not found (Debian: apt-get install openssl)" >&2; exit 1; }
"$root/test/tools/install.sh"

if plane_up; then
  echo "cluster: already up at https://127.0.0.1:$STENCIL_APISERVER_PORT (kubeconfig $kubeconfig)"
  exit 0
fi
if compgen -G "$pids/*.pid" >/dev/null; then
  echo "cluster: a previous plane in $CLUSTER_DIR is partly up; stopping it first"
  "$root/test/cluster/down.sh"
fi

for p in "$STENCIL_ETCD_PORT" "$STENCIL_ETCD_PEER_PORT" "$STENCIL_APISERVER_PORT" \
  "$STENCIL_KCM_PORT" "$STENCIL_SCHEDULER_PORT"; do
  if port_busy "$p"; then
    echo "cluster: 127.0.0.1:$p is already in use; another plane? Set the STENCIL_*_PORT" \
      "variables and CLUSTER_DIR to run a second one (see test/cluster/env.sh)" >&2
    exit 1
  fi
done

# Every up starts from an empty etcd; logs of the last run are replaced.
rm -rf "$CLUSTER_DIR/etcd" "$logs"
mkdir -p "$pki" "$logs" "$pids" "$CLUSTER_DIR/etcd"
chmod 700 "$CLUSTER_DIR/etcd"

# --- certificates: made once per CLUSTER_DIR, kept across up/down ----------
pki_make() {
  local cnf="$pki/openssl.cnf"
  cat >"$cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
EOF
  ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
  # leaf NAME SUBJECT EXTENSIONS signs NAME.crt with the CA.
  leaf() {
    ec_key "$pki/$1.key"
    openssl req -new -config "$cnf" -key "$pki/$1.key" -subj "$2" |
      openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -CAserial "$pki/ca.srl" -days 3650 -extfile "$cnf" -extensions "$3" \
        -out "$pki/$1.crt" 2>/dev/null
  }
  ec_key "$pki/ca.key"
  openssl req -x509 -new -config "$cnf" -extensions ca -key "$pki/ca.key" \
    -subj "/CN=stencil-local-ca" -days 3650 -out "$pki/ca.crt"
  leaf apiserver "/CN=kube-apiserver" server
  leaf admin "/O=system:masters/CN=stencil-admin" client
  leaf kube-controller-manager "/CN=system:kube-controller-manager" client
  leaf kube-scheduler "/CN=system:kube-scheduler" client
  leaf kwok "/O=system:masters/CN=kwok" client
  leaf front-proxy-client "/CN=front-proxy-client" client
  # Service-account tokens are signed with RSA, the algorithm every consumer
  # of them supports.
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
  echo 2 >"$pki/version"
}
# Bump the version when pki_make changes, so old directories are redone.
[ "$(cat "$pki/version" 2>/dev/null)" = 2 ] || pki_make

# write_kubeconfig FILE CERT-NAME writes a kubeconfig with embedded credentials.
write_kubeconfig() {
  local b64="base64 -w0"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: stencil-local
  cluster:
    server: https://127.0.0.1:$STENCIL_APISERVER_PORT
    certificate-authority-data: $($b64 "$pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 "$pki/$2.crt")
    client-key-data: $($b64 "$pki/$2.key")
contexts:
- name: stencil-local
  context:
    cluster: stencil-local
    user: $2
current-context: stencil-local
EOF
  chmod 600 "$1"
}
write_kubeconfig "$kubeconfig" admin
for c in kube-controller-manager kube-scheduler kwok; do
  write_kubeconfig "$pki/$c.kubeconfig" "$c"
done

cat >"$CLUSTER_DIR/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $pki/kube-scheduler.kubeconfig
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
EOF

# --- processes --------------------------------------------------------------
# start_component (components.sh) launches each with its flags.
# shellcheck source=test/cluster/components.sh
source "$root/test/cluster/components.sh"

# check_alive fails, with the end of its log, if a started process has exited.
check_alive() {
  local c
  for c in "${started[@]}"; do
    if ! pid_of "$c" >/dev/null; then
      echo "cluster: $c exited during start-up; last lines of $logs/$c.log:" >&2
      tail -n 30 "$logs/$c.log" >&2
      echo "cluster: stopping what was started" >&2
      "$root/test/cluster/down.sh" >&2 || true
      exit 1
    fi
  done
}

# wait_until SECONDS WHAT COMMAND... polls COMMAND until it succeeds, failing
# after SECONDS or as soon as a started process dies.
wait_until() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    check_alive
    if ((SECONDS >= deadline)); then
      echo "cluster: timed out after ${limit}s waiting for $what" >&2
      "$root/test/cluster/down.sh" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
}

start_component etcd
start_component kube-apiserver
wait_until 60 "kube-apiserver /readyz" api_ready
start_component kube-controller-manager
start_component kube-scheduler
start_component kwok

# Fake nodes: large enough for 20,000 pods each.
nodes=()
for ((i = 0; i < STENCIL_NODES; i++)); do nodes+=("node/kwok-node-$i"); done
for n in "${nodes[@]#node/}"; do
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $n
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
    type: kwok
spec: {}
status:
  allocatable: {cpu: "10000", memory: 10000Gi, pods: "20000"}
  capacity: {cpu: "10000", memory: 10000Gi, pods: "20000"}
EOF
done | create_once kc apply -f - >/dev/null

node_ready() { kc wait --for=condition=Ready "${nodes[@]}" --timeout=1s; }
wait_until 60 "fake nodes to be Ready" node_ready
wait_until 60 "the default ServiceAccount" kc -n default get serviceaccount default
scheduler_serving() { port_busy "$STENCIL_SCHEDULER_PORT"; }
wait_until 30 "kube-scheduler to serve" scheduler_serving
check_alive

echo "cluster: up in $(since "$start")s: https://127.0.0.1:$STENCIL_APISERVER_PORT," \
  "$STENCIL_NODES fake node(s), logs in $logs"
echo "cluster: export KUBECONFIG=$kubeconfig"
