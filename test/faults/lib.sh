# Helpers for the fault scenarios in test/faults; source it first:
#
#   source "$(dirname "$0")/lib.sh"
#   use_namespace apiserver-kill   # namespace, counting proxy, foreign objects
#   start_replica a                # stencil run, through the proxy's listener a
#   apply_workload 1               # 100 WebApps + 100 Memcacheds
#   ... the fault ...
#   wait_recovered                 # all Ready at their generation: RECOVERED_MS
#   quiet_window                   # invariants, then 60 s with no write
#   figures "..."                  # the scenario's line in the summary
#
# It builds on the smoke suite's helpers (test/smoke/lib.sh: k, kn, step, ok,
# fail, expect_eq, wait_for, install_crds, copy_config...; create_once from
# test/cluster/env.sh). What is new here:
#
# - Every stencil process talks to the API server through countproxy
#   (test/faults/countproxy), one named listener per replica (a, b), so the
#   requests it makes are counted outside it, by verb, resource and code, and
#   survive the process being killed. proxy_summary SINCE UNTIL [TAG] prints
#   them as key=value; fig KEY picks one.
# - faultcheck (test/faults/faultcheck) waits for readiness and checks the
#   invariants every scenario ends with: every custom resource Ready at its
#   generation, every child present once, owned by the right UID, with the
#   rendered content, no orphan, no foreign object touched, every write in
#   the scenario's namespace.
# - The no-hot-loop window: the 60 s after recovery must see no write at all
#   from stencil (child, status, event, not even a refused one), Lease
#   renewals aside (counted).
# - The plane's processes: stop_component NAME SIGNAL and restart_component
#   NAME (with test/cluster/components.sh, the flags up.sh starts them with);
#   whatever a scenario stopped is started again when it exits.
#
# STENCIL_FAULTS_WORKLOAD (default 200) and STENCIL_FAULTS_QUIET (seconds,
# default 60) resize the workload and the window, for a quick look.
#
# The workload is WORKLOAD custom resources (default 200), half WebApps
# (wa-NNN) and half Memcacheds (mc-NNN), one replica each, labelled
# faults.stencil.dev/workload=true, in the scenario's own namespace.

# shellcheck source=test/smoke/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../smoke/lib.sh"
# shellcheck source=test/cluster/components.sh
source "$smoke_root/test/cluster/components.sh"

FAULTS_LOGS=${STENCIL_FAULTS_LOGS:-$logs/faults}
COUNTPROXY=${COUNTPROXY:-$smoke_root/bin/countproxy}
FAULTCHECK=${FAULTCHECK:-$smoke_root/bin/faultcheck}
WORKLOAD=${STENCIL_FAULTS_WORKLOAD:-200}
# The window after recovery in which stencil must write nothing (seconds).
QUIET_SECONDS=${STENCIL_FAULTS_QUIET:-60}
FAULTS_CONFIG="$smoke_root/crds/stencil.yaml"
# FAULTS_SCOPE, when set (even empty), drops start_replica's "--namespace
# $NS": a scenario whose config lists the namespaces itself sets it.
WORKLOAD_SELECTOR=faults.stencil.dev/workload=true
WORK=""
PROXY_PID=""
PROXY_PORT=""
declare -A PROXY_PORTS=() RPID=() RHEALTH=() RMETRICS=() RLOG=() RRC=()
FOREIGN_RV=()
RECOVERED_MS=""
CHECKED=""

# now_ms prints the Unix time in milliseconds.
now_ms() { local t=${EPOCHREALTIME/./}; echo "${t:0:${#t}-3}"; }

# secs MS1 MS2 prints MS2-MS1 in seconds with one decimal.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

# use_namespace NAME makes a fresh namespace faults-NAME-<random> in $NS,
# installs the example CRDs, starts the counting proxy and creates the
# foreign objects that no scenario may touch. Everything is removed when the
# scenario exits.
use_namespace() {
  NS="faults-$1-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  WORK=$(mktemp -d)
  trap _faults_cleanup EXIT
  # set -e ends a scenario at any failing command: say which.
  trap 'rc=$?; echo "[$SCENARIO] FAIL: line $LINENO exited $rc: $BASH_COMMAND" >&2
    [ -z "${STENCIL_FAULTS_FIGURES:-}" ] || echo "FAIL: line $LINENO exited $rc: ${BASH_COMMAND:0:300}" >"$STENCIL_FAULTS_FIGURES"' ERR
  # The runner's timeout sends SIGTERM: clean up then too.
  trap 'exit 143' TERM
  create_once k create namespace "$NS" >/dev/null
  k label namespace "$NS" stencil.dev/faults="$SCENARIO" >/dev/null
  echo "[$SCENARIO] namespace $NS"
  mkdir -p "$FAULTS_LOGS"
  install_crds
  start_proxy
  make_foreign
}

# start_proxy starts countproxy with listeners a, b and c (or the tags in
# PROXY_TAGS) and writes a kubeconfig for each ($WORK/kubeconfig-a, -b, -c),
# with no credentials: the proxy adds the admin's.
start_proxy() {
  local tag args=()
  for tag in ${PROXY_TAGS:-a b c}; do
    take_port "PROXY_PORTS[$tag]"
    args+=(--listen "$tag=127.0.0.1:${PROXY_PORTS[$tag]}")
    cat >"$WORK/kubeconfig-$tag" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: countproxy, cluster: {server: "http://127.0.0.1:${PROXY_PORTS[$tag]}"}}]
users: [{name: stencil, user: {}}]
contexts: [{name: countproxy, context: {cluster: countproxy, user: stencil}}]
current-context: countproxy
EOF
  done
  PROXY_PORT=${PROXY_PORTS[a]}
  "$COUNTPROXY" --kubeconfig "$KUBECONFIG" "${args[@]}" >>"$FAULTS_LOGS/$SCENARIO-$NS-proxy.log" 2>&1 &
  PROXY_PID=$!
  local deadline=$((SECONDS + 10))
  until port_busy "${PROXY_PORTS[a]}" && port_busy "${PROXY_PORTS[b]}" && port_busy "${PROXY_PORTS[c]}"; do
    kill -0 "$PROXY_PID" 2>/dev/null || fail "countproxy exited: $(tail -n 5 "$FAULTS_LOGS/$SCENARIO-$NS-proxy.log")"
    ((SECONDS < deadline)) || fail "countproxy not listening after 10s"
    sleep 0.05
  done
}

# proxy_get PATH prints the body of countproxy's answer to GET PATH.
proxy_get() {
  local out
  out=$(http_get "$PROXY_PORT" "$1") || fail "countproxy does not answer $1"
  printf '%s\n' "$out" | tr -d '\r' | sed '1,/^$/d'
}

# proxy_summary SINCE_MS [UNTIL_MS] [TAG] prints the request counts (key=value).
proxy_summary() {
  proxy_get "/countproxy/summary?since=$1&until=${2:-}&tag=${3:-}"
}

# proxy_writes SINCE_MS [UNTIL_MS] [TAG] prints the write log: one line per
# mutating request, "ms tag verb resource namespace name code dryRun".
proxy_writes() {
  proxy_get "/countproxy/writes?since=$1&until=${2:-}&tag=${3:-}"
}

# fig KEY SUMMARY prints the value of KEY in a proxy_summary line (0 if absent).
fig() {
  awk -v k="$1" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == k) { v = substr($i, n + 1) } } } END { print v + 0 }' <<<"$2"
}

# writes_at_least KEY N [TAG] succeeds once KEY (e.g. child) counts N or more
# since the proxy started (for wait_for).
writes_at_least() {
  local got
  got=$(fig "$1" "$(proxy_summary 0 "" "${3:-}")")
  ((got >= $2)) || { echo "$1 is $got, want >= $2"; return 1; }
}

# make_foreign creates objects stencil must never touch: a Deployment, a
# Service and a ConfigMap of others in the same namespace, labelled
# faults.stencil.dev/foreign=true; FOREIGN_RV records the resourceVersions
# of those whose only writer is their author.
make_foreign() {
  create_once kn apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: foreign-web, labels: {faults.stencil.dev/foreign: "true", app: foreign-web}}
spec:
  replicas: 0
  selector: {matchLabels: {app: foreign-web}}
  template:
    metadata: {labels: {app: foreign-web}}
    spec: {containers: [{name: web, image: registry.k8s.io/pause:3.10}]}
---
apiVersion: v1
kind: Service
metadata: {name: foreign-svc, labels: {faults.stencil.dev/foreign: "true"}}
spec: {selector: {app: foreign-web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: foreign-cm, labels: {faults.stencil.dev/foreign: "true"}}
data: {owner: someone-else}
EOF
  FOREIGN_RV=(
    "Service/foreign-svc=$(kn get service foreign-svc -o jsonpath='{.metadata.resourceVersion}')"
    "ConfigMap/foreign-cm=$(kn get configmap foreign-cm -o jsonpath='{.metadata.resourceVersion}')"
  )
}

# start_replica TAG [FLAG...] starts `stencil run` watching $NS through the
# proxy's listener TAG, with the config $FAULTS_CONFIG, and returns once its
# /readyz answers 200 (a standby under leader election is ready too). Its
# log is $FAULTS_LOGS/<scenario>-<ns>-TAG.log.
start_replica() {
  launch_replica "$@"
  wait_replica_ready "$1"
}

# launch_replica TAG [FLAG...] starts replica TAG like start_replica but
# does not wait for it to be ready (wait_replica_ready TAG does). Replicas
# that must start together, as a Deployment's pods do, are launched with
# launch_together: one launch_replica after the other takes a few
# milliseconds on an idle machine, hundreds on a busy one.
launch_replica() {
  local tag=$1
  shift
  [ -x "$STENCIL" ] || fail "$STENCIL is missing; make faults builds it"
  if [ -n "${RPID[$tag]:-}" ] && kill -0 "${RPID[$tag]}" 2>/dev/null; then
    fail "start_replica $tag: already running (pid ${RPID[$tag]})"
  fi
  take_port "RHEALTH[$tag]"
  take_port "RMETRICS[$tag]"
  RLOG[$tag]="$FAULTS_LOGS/$SCENARIO-$NS-$tag.log"
  echo "--- $(date -u +%T) stencil run (replica $tag) $*" >>"${RLOG[$tag]}"
  local scope=(--namespace "$NS")
  [ "${FAULTS_SCOPE-unset}" = unset ] || scope=()
  local cmd=("$STENCIL" run --config "$FAULTS_CONFIG" "${scope[@]}" --kubeconfig "$WORK/kubeconfig-$tag"
    --metrics-bind-address "127.0.0.1:${RMETRICS[$tag]}" --health-probe-bind-address "127.0.0.1:${RHEALTH[$tag]}" "$@")
  if [ -n "$LAUNCH_GATE" ]; then
    # Held at launch_together's gate: a line from the fifo releases it; it
    # records when (microseconds) and becomes stencil (same pid).
    {
      exec {LAUNCH_GATE_FD}>&-
      read -r _ <"$LAUNCH_GATE" || true
      echo "${EPOCHREALTIME/./}" >"$LAUNCH_GATE.$tag"
      exec "${cmd[@]}"
    } >>"${RLOG[$tag]}" 2>&1 &
  else
    "${cmd[@]}" >>"${RLOG[$tag]}" 2>&1 &
  fi
  RPID[$tag]=$!
  RRC[$tag]=""
}

# launch_together TAGS [FLAG...] launches a replica for each tag in TAGS
# ("a b c"), each with FLAGs, as launch_replica does, but holds each one at
# a gate (a fifo it reads a line from before it execs stencil) until all
# are forked, then releases them with one write: how long forking them took
# (442 ms in CI with another job on the second core) does not matter, only
# one wake-up does. Sets LAUNCH_SPREAD_MS to the spread of the times at
# which they were released, as each recorded it just before its exec.
LAUNCH_GATE=""
LAUNCH_GATE_FD=""
LAUNCH_SPREAD_MS=""
launch_together() {
  local tags=$1 tag us min="" max="" lines="" deadline=$((SECONDS + 30))
  shift
  LAUNCH_GATE="$WORK/launch-gate"
  rm -f "$LAUNCH_GATE" "$LAUNCH_GATE".*
  mkfifo "$LAUNCH_GATE"
  # Held open for reading and writing until every member is released: a
  # member's open does not wait for a writer, its read waits for its line,
  # and a member slow to open still finds its line in the fifo.
  exec {LAUNCH_GATE_FD}<>"$LAUNCH_GATE"
  for tag in $tags; do
    launch_replica "$tag" "$@"
    lines+=$'go\n'
  done
  # One write, one line per member: bash reads a fifo a byte at a time,
  # so each member's read takes one line.
  printf '%s' "$lines" >&"$LAUNCH_GATE_FD"
  for tag in $tags; do
    until read -r us 2>/dev/null <"$LAUNCH_GATE.$tag"; do
      replica_alive "$tag" || fail "replica $tag exited at the launch gate; log ${RLOG[$tag]}: $(tail -n 5 "${RLOG[$tag]}")"
      ((SECONDS < deadline)) || fail "replica $tag not released from the launch gate after 30s"
      sleep 0.01
    done
    if [ -z "$min" ] || ((us < min)); then min=$us; fi
    if [ -z "$max" ] || ((us > max)); then max=$us; fi
  done
  exec {LAUNCH_GATE_FD}>&-
  LAUNCH_GATE=""
  LAUNCH_SPREAD_MS=$(((max - min) / 1000))
}

# wait_replica_ready TAG waits up to 60 s for replica TAG's /readyz.
wait_replica_ready() {
  local tag=$1 deadline=$((SECONDS + 60))
  until replica_ready "$tag"; do
    if ! kill -0 "${RPID[$tag]}" 2>/dev/null; then
      wait "${RPID[$tag]}" || true
      fail "replica $tag exited before it was ready; log ${RLOG[$tag]}: $(tail -n 20 "${RLOG[$tag]}")"
    fi
    ((SECONDS < deadline)) || fail "replica $tag not ready after 60s; log ${RLOG[$tag]}"
    sleep 0.1
  done
}

# leader_flags prints the leader-election flags every replica of a scenario shares.
leader_flags() { echo --leader-elect --leader-elect-namespace "$NS" --leader-elect-id stencil-faults; }

# leader_tag prints the tag (a or b) of the replica holding the Lease, from
# the write log: the last successful Lease write's listener.
leader_tag() {
  proxy_writes 0 | awk '$4 == "leases" && $7 ~ /^2/ { t = $2 } END { print t }'
}

# first_write TAG SINCE_MS prints the time (ms) of replica TAG's first
# successful write other than a Lease write since SINCE_MS, or nothing.
# (awk reads to the end: exiting at the first match would leave the proxy's
# answer unread, and curl's broken pipe, under pipefail and set -e, would end
# the scenario without a word.)
first_write() {
  proxy_writes "$2" "" "$1" | awk '$4 != "leases" && $7 ~ /^2/ && !found { print $1; found = 1 }'
}

# last_write TAG [SINCE_MS] prints the time (ms) of replica TAG's last
# write other than a Lease write (answered or not), or nothing.
last_write() {
  proxy_writes "${2:-0}" "" "$1" | awk '$4 != "leases" { t = $1 } END { print t }'
}

# writers_apart SINCE_MS [GAP_MS] fails the scenario if two replicas sent
# writes (Lease writes included, answered or not) less than GAP_MS (default
# 1000) apart at any point since SINCE_MS: a handover leaves a gap of at
# least the Lease's expiry or a release's round trip, never an overlap. It
# prints the shortest gap between writes of two different replicas.
writers_apart() {
  local gap=${2:-1000} out
  out=$(proxy_writes "$1" | sort -n -k1,1 | awk -v gap="$gap" '
    NR > 1 && $2 != tag { d = $1 - t; if (min == "" || d < min) min = d; if (d < gap) bad = bad sprintf("%s %s then %s %s (%d ms)\n", t, tag, $1, $2, d) }
    { t = $1; tag = $2 }
    END { printf "%s", bad; print (min == "" ? "none" : min) }')
  if [ "$(wc -l <<<"$out")" -gt 1 ]; then
    fail "two replicas wrote within ${gap} ms of each other: $(head -n 10 <<<"$out")"
  fi
  echo "$out"
}

# last_child_write SINCE_MS UNTIL_MS prints the time (ms) of the last
# successful child write in the period: when stencil had written every
# child; what follows is waiting for the cluster to make them ready.
last_child_write() {
  proxy_writes "$1" "$2" | awk '$4 ~ /^(deployments|services|configmaps|poddisruptionbudgets|horizontalpodautoscalers)$/ && $7 ~ /^2/ { t = $1 } END { print t }'
}

# lease_holder prints the holder of the scenario's leader-election Lease.
lease_holder() { kn get lease stencil-faults -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }

# replica_ready TAG succeeds when replica TAG's /readyz answers 200.
replica_ready() { [ "$(http_status "${RHEALTH[$1]}" /readyz 2>/dev/null)" = 200 ]; }

# replica_alive TAG succeeds while replica TAG's process runs (not a zombie).
replica_alive() { [ -n "${RPID[$1]:-}" ] && running "${RPID[$1]}"; }

# signal_replica TAG SIGNAL sends SIGNAL to replica TAG.
signal_replica() { kill "-$2" "${RPID[$1]}"; }

# wait_replica_exit TAG SECONDS waits for replica TAG to exit and sets
# RRC[TAG] to its exit status; it fails the scenario after SECONDS.
wait_replica_exit() {
  local tag=$1 deadline=$((SECONDS + $2)) rc=0
  while replica_alive "$tag"; do
    ((SECONDS < deadline)) || fail "replica $tag (pid ${RPID[$tag]}) still running after $2s"
    sleep 0.05
  done
  wait "${RPID[$tag]}" 2>/dev/null || rc=$?
  RRC[$tag]=$rc
}

# new_namespace NAME creates namespace NAME, labelled with the scenario
# and deleted (without waiting) when the scenario ends.
new_namespace() {
  create_once k create namespace "$1" >/dev/null
  k label namespace "$1" stencil.dev/faults="$SCENARIO" >/dev/null
  DEFERRED+=("$(printf '%q ' "$KUBECTL" delete namespace "$1" --wait=false)")
}

# ring_names PREFIX COUNT prints COUNT namespace names starting PREFIX-,
# in the naming RING_NAMING picks: sequential (PREFIX-team-01 ...), words
# (PREFIX-payments ...) or hex (PREFIX-3fa9c1 ...). The API server's
# FNV-1a puts sequential names into one sliver of the hash space: the ring
# must divide them as evenly as random ones.
ring_names() {
  local prefix=$1 count=$2 i
  local words=(payments checkout search billing auth catalog orders shipping inventory reviews profile cart
    ledger gateway notify reports metrics media pricing promo support identity audit export frontend
    backend mobile data ml infra security platform web api)
  for ((i = 0; i < count; i++)); do
    case ${RING_NAMING:-sequential} in
    sequential) printf '%s-team-%02d\n' "$prefix" $((i + 1)) ;;
    words) printf '%s-%s\n' "$prefix" "${words[i % ${#words[@]}]}$( ((i < ${#words[@]})) || echo "-$((i / ${#words[@]}))")" ;;
    hex) printf '%s-%s\n' "$prefix" "$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')" ;;
    *) fail "RING_NAMING=$RING_NAMING: want sequential, words or hex" ;;
    esac
  done
}

# images_are NAME IMAGE NS... succeeds once Deployment NAME runs IMAGE in
# every namespace NS: one list, so that a takeover is timed to within a
# poll, not a poll plus a kubectl call per namespace.
images_are() {
  local name=$1 image=$2 got ns
  shift 2
  got=$(k get deployments -A --field-selector "metadata.name=$name" -o \
    jsonpath='{range .items[*]}{.metadata.namespace}={.spec.template.spec.containers[0].image}{"\n"}{end}') || return 1
  for ns in "$@"; do
    grep -qxF "$ns=$image" <<<"$got" || return 1
  done
}

# no_terminating_namespaces succeeds once no namespace is being deleted:
# the ring divides the namespaces that exist, and one that goes away mid-
# check moves others.
no_terminating_namespaces() {
  local left
  left=$(k get namespaces -o jsonpath='{range .items[?(@.status.phase=="Terminating")]}{.metadata.name}{"\n"}{end}') || return 1
  [ -z "$left" ] || { echo "$(wc -l <<<"$left") namespaces terminating"; return 1; }
}

# no_other_webapps succeeds when no WebApp is left in any namespace.
no_other_webapps() {
  local left
  left=$(k get webapps -A -o name) || return 1
  [ -z "$left" ] || { echo "$(wc -l <<<"$left") WebApps left"; return 1; }
}

# wait_earlier_scenarios_gone waits until the WebApps and namespaces of
# earlier scenarios are gone: a scenario that counts WebApps cluster-wide
# (the rings) must not count theirs.
wait_earlier_scenarios_gone() {
  wait_for 180 "the WebApps of earlier scenarios to be deleted" no_other_webapps
  wait_for 180 "the namespaces of earlier scenarios to be deleted" no_terminating_namespaces
}

# kill_replica TAG kills replica TAG with SIGKILL and reaps it.
kill_replica() {
  signal_replica "$1" KILL
  wait_replica_exit "$1" 10
}

# workload GEN [N] prints the workload: WORKLOAD/2 WebApps and as many
# Memcacheds. The first N of each (default all) have spec generation GEN: a
# different image tag (and, for WebApps, port) per GEN, so applying GEN+1
# changes their spec; the others have GEN 1.
workload() {
  local gen=$1 n=${2:-$((WORKLOAD / 2))} i g
  for ((i = 0; i < WORKLOAD / 2; i++)); do
    g=1
    ((i < n)) && g=$gen
    printf -- '---
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata: {name: wa-%03d, labels: {faults.stencil.dev/workload: "true"}}
spec: {image: "registry.k8s.io/pause:3.%d", replicas: 1, port: %d}
---
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: mc-%03d, labels: {faults.stencil.dev/workload: "true"}}
spec: {size: 1, image: "memcached:1.6.%d"}
' "$i" "$((9 + g))" "$((8079 + g))" "$i" "$((20 + g))"
  done
}

# apply_workload GEN [N] applies the workload (server-side, field manager
# faults-author) as one kubectl call, as a person or a pipeline would.
apply_workload() {
  workload "$@" | kn apply --server-side --field-manager=faults-author -f - >/dev/null
}

# wait_recovered [SECONDS] waits (default 300 s) until the workload is Ready
# at its generation and sets RECOVERED_MS to when it first was.
wait_recovered() {
  local out
  out=$("$FAULTCHECK" wait-ready --config "$FAULTS_CONFIG" --namespace "$NS" --selector "$WORKLOAD_SELECTOR" \
    --count "$WORKLOAD" --timeout "${1:-300}s" 2>&1) || fail "workload not Ready: $out"
  RECOVERED_MS=$out
}

# check_invariants [FAULTCHECK-FLAG...] checks every invariant (see
# faultcheck) for the workload and the foreign objects, and that every write
# stencil made through the proxy stayed in $NS; sets CHECKED to its summary.
check_invariants() {
  local args=() f out
  for f in "${FOREIGN_RV[@]}"; do args+=(--foreign-rv "$f"); done
  out=$("$FAULTCHECK" invariants --config "$FAULTS_CONFIG" --namespace "$NS" --selector "$WORKLOAD_SELECTOR" \
    --proxy "http://127.0.0.1:$PROXY_PORT" "${args[@]}" "$@" 2>&1) || fail "invariants: $out"
  CHECKED=$(tail -n 1 <<<"$out")
  printf '%s\n' "$out" | sed '$d' | sed "s/^/[$SCENARIO] /"
}

# quiet_window [FAULTCHECK-FLAG...] is how every scenario ends, from
# RECOVERED_MS: the invariants are checked at once, then the scenario waits
# until QUIET_SECONDS after recovery and counts what stencil wrote in that
# window: it must be nothing (no child write, no status patch, no event, no
# failed write); Lease renewals are counted apart. The invariants are checked
# again at the end of the window, and every replica still expected to run
# (QUIET_REPLICAS, default "a") must be alive with /readyz 200. Sets
# QUIET_FIGS to the window's figures.
QUIET_REPLICAS=${QUIET_REPLICAS:-a}
quiet_window() {
  [ -n "$RECOVERED_MS" ] || fail "quiet_window: not recovered yet"
  step "invariants at recovery, then ${QUIET_SECONDS}s in which stencil must write nothing"
  check_invariants "$@"
  local end=$((RECOVERED_MS + QUIET_SECONDS * 1000)) left s tag
  left=$((end - $(now_ms)))
  if ((left > 0)); then
    # The window is a measurement period, not a wait for a condition.
    sleep "$(awk -v ms="$left" 'BEGIN { printf "%.3f", ms / 1000 }')"
  fi
  s=$(proxy_summary "$RECOVERED_MS" "$end")
  local bad=$(($(fig child "$s") + $(fig status "$s") + $(fig event "$s") + $(fig other "$s") + $(fig failed "$s")))
  QUIET_FIGS="$(fig writes "$s") writes in the ${QUIET_SECONDS}s after recovery ($(fig lease "$s") Lease renewals, $bad other)"
  if ((bad > 0)); then
    echo "[$SCENARIO] writes in the window:" >&2
    proxy_writes "$RECOVERED_MS" "$end" | grep -v ' leases ' | head -n 20 >&2
    fail "hot loop: $bad writes other than Lease renewals in the ${QUIET_SECONDS}s after recovery: $s"
  fi
  check_invariants "$@" >/dev/null
  for tag in $QUIET_REPLICAS; do
    replica_alive "$tag" || fail "replica $tag is not running at the end"
    replica_ready "$tag" || fail "replica $tag: /readyz is $(http_status "${RHEALTH[$tag]}" /readyz) at the end"
  done
  ok "$QUIET_FIGS; replicas $QUIET_REPLICAS alive, /readyz 200"
}

# write_figs SINCE UNTIL [TAG] prints the writes of a period as a phrase.
write_figs() {
  local s
  s=$(proxy_summary "$@")
  echo "$(fig writes "$s") writes (child $(fig child "$s"), status $(fig status "$s"), event $(fig event "$s"), lease $(fig lease "$s"); $(fig failed "$s") failed)"
}

# child_writes SINCE_MS [UNTIL_MS] prints, per child written, "resource
# name creates updates lost": successful applies that created it (201), that
# updated it (200), and applies whose answer never came back (the client was
# killed, code 499, or the API server went away, code 0): the server may or
# may not have made those.
child_writes() {
  proxy_writes "$@" | awk '$3 == "apply" && $8 == "false" && $4 ~ /^(deployments|services|configmaps|poddisruptionbudgets|horizontalpodautoscalers)$/ {
      k = $4 " " $6; seen[k] = 1
      if ($7 == 201) c[k]++; else if ($7 == 200) u[k]++; else if ($7 == 499 || $7 == 0) l[k]++ }
    END { for (k in seen) print k, c[k] + 0, u[k] + 0, l[k] + 0 }' | sort
}

# expect_written_once SINCE_MS CHANGED_PATTERN checks the child writes since
# SINCE_MS: every child of the workload created exactly once, none updated,
# except children whose name matches the extended regular expression
# CHANGED_PATTERN (their resource's spec changed): at most one update each.
# Prints how many creates and updates it saw.
expect_written_once() {
  local out
  out=$(child_writes "$1" | awk -v changed="${2:-^$}" -v want="$((WORKLOAD * 3 / 2))" '
    { n++; c = $3; u = $4; l = $5
      # An apply whose answer was lost (the API server went away, or the
      # client was killed) may have created the child; its retry then finds
      # it and answers 200: that is the create, not an update.
      if (c == 0 && l > 0 && u > 0) { c = 1; u--; lost++ } else if (c == 0 && l > 0) lost++
      updates += u
      if (c > 1 || (c == 0 && l == 0)) bad = bad sprintf("%s/%s created %d times; ", $1, $2, c)
      if ($2 ~ changed) { if (u > 1) bad = bad sprintf("%s/%s updated %d times; ", $1, $2, u) }
      else if (u > 0) bad = bad sprintf("%s/%s (spec unchanged) updated %d times; ", $1, $2, u) }
    END { if (n != want) bad = bad sprintf("%d children written, want %d; ", n, want)
      if (bad != "") { print bad; exit 1 }
      printf "%d children created once each (%d by an apply whose answer was lost), %d updated once (spec changed), none written twice\n", n, lost, updates }') ||
    fail "children written more than once: ${out:0:1500}"
  echo "$out"
}

# figures TEXT records the scenario's figures for the summary line of
# test/cluster/faults.sh, and prints them.
figures() {
  echo "[$SCENARIO] figures: $*"
  [ -z "${STENCIL_FAULTS_FIGURES:-}" ] || echo "$*" >"$STENCIL_FAULTS_FIGURES"
}

# --- the plane's processes ----------------------------------------------------

# stop_component NAME SIGNAL sends SIGNAL to the plane's component NAME and
# waits (60 s at most) until it has exited.
stop_component() {
  local pid deadline=$((SECONDS + 60))
  pid=$(pid_of "$1") || fail "$1 is not running"
  # Whatever happens next, the plane is whole again when the scenario ends.
  defer ensure_component "$1"
  kill "-$2" "$pid"
  while running "$pid"; do
    ((SECONDS < deadline)) || fail "$1 (pid $pid) did not exit within 60s of SIG$2"
    sleep 0.05
  done
}

# stop_apply PID ends a kubectl apply that a fault interrupted (it may hang
# on an API server without etcd, each object up to the server's 60 s
# timeout): the author gives up and re-applies once the plane is back.
stop_apply() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# restart_component NAME starts component NAME again (components.sh) and,
# for the API server and etcd, waits until the API answers /readyz.
restart_component() {
  start_component "$1" || fail "cannot start $1"
  case "$1" in
    etcd | kube-apiserver) wait_for 120 "kube-apiserver /readyz after restarting $1" component_ready "$1" ;;
    *) pid_of "$1" >/dev/null || fail "$1 exited at once: $(tail -n 20 "$logs/$1.log")" ;;
  esac
}

# component_ready NAME succeeds once the API server is ready; while it is
# not, it starts NAME again if it has exited. A process killed with SIGKILL
# shows as a zombie (stop_component's "gone") while its other threads still
# close its files: for a moment its port is still bound, and the new one
# fails with "address already in use" (seen after a run of scenarios).
component_ready() {
  api_ready && return 0
  if ! pid_of "$1" >/dev/null; then
    echo "$1 is not running (last log line: $(tail -n 1 "$logs/$1.log" | cut -c1-200)); starting it again"
    start_component "$1" || true
  fi
  return 1
}

# ensure_component NAME starts component NAME if it is not running (or
# resumes it if stopped), for the scenario's cleanup.
ensure_component() {
  local pid
  if pid=$(pid_of "$1"); then
    kill -CONT "$pid" 2>/dev/null || true
  else
    start_component "$1"
  fi
}

# etcd_revision prints etcd's current revision (etcd's v3 JSON gateway).
etcd_revision() {
  local body out
  body='{"key":"AA==","limit":1}'
  out=$(exec 3<>"/dev/tcp/127.0.0.1/$STENCIL_ETCD_PORT" &&
    printf 'POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" >&3 &&
    timeout 5 cat <&3) || fail "etcd does not answer"
  sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p' <<<"$out"
}

# etcd_compact REV compacts etcd's history up to revision REV.
etcd_compact() {
  local body="{\"revision\":\"$1\",\"physical\":true}" out
  out=$(exec 3<>"/dev/tcp/127.0.0.1/$STENCIL_ETCD_PORT" &&
    printf 'POST /v3/kv/compaction HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s' "${#body}" "$body" >&3 &&
    timeout 10 cat <&3) || fail "etcd does not answer"
  [[ "$out" == *" 200 "* ]] || fail "compaction failed: $out"
}

_faults_cleanup() {
  local rc=$? tag
  for tag in "${!RPID[@]}"; do
    if replica_alive "$tag"; then
      kill -CONT "${RPID[$tag]}" 2>/dev/null || true
      kill -TERM "${RPID[$tag]}" 2>/dev/null || true
    fi
  done
  for tag in "${!RPID[@]}"; do wait "${RPID[$tag]}" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    for tag in "${!RLOG[@]}"; do
      echo "[$SCENARIO] last lines of replica $tag's log ${RLOG[$tag]}:" >&2
      tail -n 15 "${RLOG[$tag]}" >&2 || true
    done
  fi
  if [ -n "$PROXY_PID" ]; then
    # The write log, for a look after the run.
    (proxy_writes 0) >"$FAULTS_LOGS/$SCENARIO-$NS-writes.log" 2>/dev/null || true
    kill "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
  fi
  for d in "${DEFERRED[@]}"; do eval "$d" >/dev/null 2>&1 || true; done
  [ -z "$WORK" ] || rm -rf "$WORK"
  [ -z "$CONFIG_DIR" ] || rm -rf "$CONFIG_DIR"
  if [ -n "$NS" ]; then
    if [ "$rc" != 0 ] && [ "${STENCIL_SMOKE_KEEP:-}" = 1 ]; then
      echo "[$SCENARIO] keeping namespace $NS (STENCIL_SMOKE_KEEP=1)" >&2
    else
      k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
    fi
  fi
  return "$rc"
}
