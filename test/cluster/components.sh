# shellcheck shell=bash disable=SC2154 # bin, logs, pids, pki, root and components come from env.sh, sourced first
# Sourced after env.sh: how each process of the plane is started. up.sh
# starts them all in order; the fault suite (test/faults) stops one
# (SIGKILL, SIGTERM, SIGSTOP) and starts it again with the same flags, on
# the same state (etcd's data directory is kept).

# The variables are for the scripts that source this file.
# shellcheck disable=SC2034

# started lists the components launched by this shell, for check_alive.
started=()

# launch NAME ARGS... starts bin/NAME in its own session, so that neither a
# Ctrl-C in the terminal nor the exit of this script reaches it. Its output
# is appended to $logs/NAME.log (up.sh starts with empty logs, a restart
# adds to them).
launch() {
  local name=$1; shift
  setsid "$bin/$name" "$@" </dev/null >>"$logs/$name.log" 2>&1 &
  local pid=$! deadline=$((SECONDS + 5))
  echo "$pid" >"$pids/$name.pid"
  started+=("$name")
  # Until the exec, the pid runs bash or setsid, which pid_of does not accept.
  while ! pid_of "$name" >/dev/null && running "$pid" && ((SECONDS < deadline)); do
    sleep 0.01
  done
}

# start_component NAME launches component NAME (one of $components) with
# its flags. It does not wait for it to serve.
start_component() {
  case "$1" in
    etcd)
      launch etcd \
        --name=stencil-local \
        --data-dir="$CLUSTER_DIR/etcd" \
        --listen-client-urls="http://127.0.0.1:$STENCIL_ETCD_PORT" \
        --advertise-client-urls="http://127.0.0.1:$STENCIL_ETCD_PORT" \
        --listen-peer-urls="http://127.0.0.1:$STENCIL_ETCD_PEER_PORT" \
        --initial-advertise-peer-urls="http://127.0.0.1:$STENCIL_ETCD_PEER_PORT" \
        --initial-cluster="stencil-local=http://127.0.0.1:$STENCIL_ETCD_PEER_PORT" \
        --unsafe-no-fsync \
        --quota-backend-bytes=$((8 * 1024 * 1024 * 1024)) \
        --log-level=warn
      ;;
    kube-apiserver)
      # kube-apiserver retries etcd until it answers, so it need not wait
      # for it. Priority and fairness is off and the in-flight limits are
      # high so that benchmarks measure the controller, not the API
      # server's throttling. Sharded list and watch (alpha in 1.36) is on,
      # for the ring; STENCIL_APISERVER_FEATURE_GATES= turns it off.
      launch kube-apiserver \
        --etcd-servers="http://127.0.0.1:$STENCIL_ETCD_PORT" \
        --bind-address=127.0.0.1 \
        --advertise-address=127.0.0.1 \
        --secure-port="$STENCIL_APISERVER_PORT" \
        --tls-cert-file="$pki/apiserver.crt" \
        --tls-private-key-file="$pki/apiserver.key" \
        --client-ca-file="$pki/ca.crt" \
        --requestheader-client-ca-file="$pki/ca.crt" \
        --requestheader-allowed-names=front-proxy-client \
        --requestheader-username-headers=X-Remote-User \
        --requestheader-group-headers=X-Remote-Group \
        --requestheader-extra-headers-prefix=X-Remote-Extra- \
        --proxy-client-cert-file="$pki/front-proxy-client.crt" \
        --proxy-client-key-file="$pki/front-proxy-client.key" \
        --authorization-mode=Node,RBAC \
        --enable-admission-plugins=OwnerReferencesPermissionEnforcement \
        --service-cluster-ip-range=10.96.0.0/16 \
        --endpoint-reconciler-type=none \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --enable-priority-and-fairness=false \
        --max-requests-inflight=3000 \
        --max-mutating-requests-inflight=1000 \
        --allow-privileged=true \
        --feature-gates="${STENCIL_APISERVER_FEATURE_GATES-ShardedListAndWatch=true}" \
        --profiling=false
      ;;
    kube-controller-manager)
      # A node is marked NotReady (and every pod on it) only after 3 minutes
      # without a heartbeat, not the default 50 s: the nodes are kwok's, and
      # what stops their heartbeats here is the control plane itself being
      # down (the fault suite stops the API server and etcd for 20-45 s),
      # after which the controller manager's informers catch up late and it
      # saw no renewal for 50 s. Pods marked so would flip the workload's
      # readiness well after the plane is back, which no test is about.
      launch kube-controller-manager \
        --node-monitor-grace-period=180s \
        --kubeconfig="$pki/kube-controller-manager.kubeconfig" \
        --authentication-kubeconfig="$pki/kube-controller-manager.kubeconfig" \
        --authorization-kubeconfig="$pki/kube-controller-manager.kubeconfig" \
        --bind-address=127.0.0.1 \
        --secure-port="$STENCIL_KCM_PORT" \
        --service-account-private-key-file="$pki/sa.key" \
        --root-ca-file="$pki/ca.crt" \
        --cluster-signing-cert-file="$pki/ca.crt" \
        --cluster-signing-key-file="$pki/ca.key" \
        --use-service-account-credentials \
        --controllers='*,-node-ipam-controller' \
        --leader-elect=false \
        --kube-api-qps=500 \
        --kube-api-burst=1000 \
        --profiling=false
      ;;
    kube-scheduler)
      launch kube-scheduler \
        --config="$CLUSTER_DIR/kube-scheduler.yaml" \
        --authentication-kubeconfig="$pki/kube-scheduler.kubeconfig" \
        --authorization-kubeconfig="$pki/kube-scheduler.kubeconfig" \
        --bind-address=127.0.0.1 \
        --secure-port="$STENCIL_SCHEDULER_PORT"
      ;;
    kwok)
      # kwok manages only nodes annotated kwok.x-k8s.io/node=fake; pods on
      # them get IPs from a /16, enough for the 10,000-replica benchmarks.
      # The heartbeat-with-lease stage posts node status only every ~10
      # minutes and relies on kwok renewing a node Lease, which it does
      # only when given a lease duration; without one the node lifecycle
      # controller marks the node Unknown after 50 s and every pod on it
      # NotReady. test/cluster/kwok-stages adds what those stages lack.
      local stage_flags=() s
      for s in "$bin"/kwok-stages/*.yaml "$root"/test/cluster/kwok-stages/*.yaml; do
        stage_flags+=(--config="$s")
      done
      launch kwok \
        --kubeconfig="$pki/kwok.kubeconfig" \
        --manage-all-nodes=false \
        --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --cidr=10.244.0.0/16 \
        --node-ip=127.0.0.1 \
        --node-lease-duration-seconds=40 \
        "${stage_flags[@]}"
      ;;
    *)
      echo "cluster: no component $1 (want one of: ${components[*]})" >&2
      return 1
      ;;
  esac
}
