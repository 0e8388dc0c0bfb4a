#!/usr/bin/env bash
# A ring whose three members start together, as deploy/ring/'s Deployment
# starts its pods: released within 100 ms of one another (forked first,
# then let go at once: see launch_together), each sees few or none of the
# others at its first list. The 30 namespaces (300 WebApps) are named as
# RING_NAMING says (words by default: together-XXXX-payments ...). Within
# 30 s of the view settling, each member caches 20% to 45% of the WebApps
# and none outside its share; each namespace is written by exactly one
# member, the one that caches it (counted at the proxy: a member's cached
# count is 10 times the namespaces it wrote). A kill -9 is taken over
# within 20 s (the 15 s Lease plus 5). Then a rolling
# restart, one member at a time (a new one ready, then the old one
# SIGTERMed, as a Deployment with maxSurge 1 does): the same checks hold
# for the three new members.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

PROXY_TAGS="a b c d e f"
use_namespace "$SCENARIO"
RING_NAMESPACES=30
PER_NAMESPACE=10
TOTAL=$((RING_NAMESPACES * PER_NAMESPACE))
RING_LABEL="faults.stencil.dev/ring=$NS"
FAULTS_SCOPE=""
ring_flags() { echo --ring faults --leader-elect-namespace "$NS"; }

wait_earlier_scenarios_gone

RING_NAMING=${RING_NAMING:-words}
mapfile -t namespaces < <(ring_names "together-$(head -c2 /dev/urandom | od -An -tx1 | tr -d ' \n')" "$RING_NAMESPACES")
echo "[$SCENARIO] $RING_NAMING names: ${namespaces[0]} ... ${namespaces[RING_NAMESPACES - 1]}"
for ns in "${namespaces[@]}"; do new_namespace "$ns"; done

# ring_workload IMAGE prints the 300 WebApps with IMAGE.
ring_workload() {
  local image=$1 ns i
  for ns in "${namespaces[@]}"; do
    for ((i = 0; i < PER_NAMESPACE; i++)); do
      printf -- '---
apiVersion: apps.example.com/v1beta1
kind: WebApp
metadata: {name: wa-%02d, namespace: %s, labels: {faults.stencil.dev/ring: "%s"}}
spec: {image: "%s", replicas: 1, port: 8080}
' "$i" "$ns" "$NS" "$image"
    done
  done
}

ready_count() {
  k get webapps -A -l "$RING_LABEL" -o \
    jsonpath='{range .items[*]}{.metadata.generation}={.status.observedGeneration}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk -F= '$1 == $2 && $3 == "True"' | wc -l
}
all_ready() { [ "$(ready_count)" = "$TOTAL" ]; }

rmetric() {
  http_get "${RMETRICS[$1]}" /metrics | tr -d '\r' |
    awk -v m="$2" -v l="${3:-}" '($1 == m || index($1, m "{") == 1) && index($1, l) { s += $NF } END { printf "%g", s + 0 }'
}
cached_of() { rmetric "$1" stencil_cached_resources 'resource="webapps.apps.example.com"'; }
outside_of() { rmetric "$1" stencil_ring_cached_outside_share 'resource="webapps.apps.example.com"'; }

# writers SINCE [UNTIL] prints "namespace tags" per ring namespace written
# (Leases and events aside).
writers() {
  proxy_writes "$1" "${2:-}" | awk '$4 != "leases" && $4 != "events" && index($5, "together-") == 1 && !seen[$5 " " $2]++ { w[$5] = w[$5] $2 }
    END { for (ns in w) print ns, w[ns] }' | sort
}

# settled TAG... succeeds once every member TAG counts 3 members and has
# settled on a view since it started.
settled() {
  local t
  for t in "$@"; do
    [ "$(rmetric "$t" stencil_ring_members)" = 3 ] && [ "$(rmetric "$t" stencil_ring_handovers_total)" != 0 ] || return 1
  done
}

# shares_right TAG... succeeds once each member caches 20% to 45% of the
# WebApps, none outside its share, and all 300 between them: what users
# see, not a share of the hash space (which an even split of the space
# satisfied while one member cached everything).
shares_right() {
  local t n sum=0
  for t in "$@"; do
    n=$(cached_of "$t")
    ((n * 100 >= TOTAL * 20 && n * 100 <= TOTAL * 45)) || return 1
    [ "$(outside_of "$t")" = 0 ] || return 1
    sum=$((sum + n))
  done
  [ "$sum" = "$TOTAL" ]
}

# check_members LABEL TAG... checks the caches and, after a spec edit in
# every namespace, who writes where.
check_members() {
  local label=$1 t
  shift
  local settled_ms
  wait_for 60 "$label: every member settled on 3 members" settled "$@"
  settled_ms=$(now_ms)
  if ! wait_for_quiet 30 shares_right "$@"; then
    local got=""
    for t in "$@"; do got="$got $t=$(cached_of "$t") (share $(rmetric "$t" stencil_ring_share), outside $(outside_of "$t"))"; done
    fail "$label: 30 s after the view settled the members cache:$got; want each 20% to 45% of the $TOTAL WebApps, none outside its share"
  fi
  local cached_line=""
  for t in "$@"; do
    cached_line="$cached_line $t=$(cached_of "$t") ($(rmetric "$t" stencil_ring_namespaces) namespaces held)"
  done
  # Every namespace gets a spec edit: its writer shows at the proxy.
  local edit_ms
  edit_ms=$(now_ms)
  ring_workload "registry.k8s.io/pause:$label" | k apply --server-side --force-conflicts --field-manager=faults-author -f - >/dev/null
  wait_for 120 "$label: all $TOTAL WebApps Ready after the edit" all_ready
  local split
  split=$(writers "$edit_ms")
  expect_eq "$label: ring namespaces written after the edit" "$RING_NAMESPACES" "$(wc -l <<<"$split")"
  local shared
  shared=$(awk 'length($2) > 1' <<<"$split")
  [ -z "$shared" ] || fail "$label: namespaces written by more than one member: $shared"
  for t in "$@"; do
    local wrote
    wrote=$(awk -v t="$t" '$2 == t' <<<"$split" | wc -l)
    expect_eq "$label: WebApps member $t caches (10 per namespace it wrote)" "$((wrote * PER_NAMESPACE))" "$(cached_of "$t")"
  done
  ok "$label: settled, then caches:$cached_line (none outside a share) within 30 s; each namespace written by exactly the member that caches it"
  CACHED_LINES="${CACHED_LINES:+$CACHED_LINES;}$label:$cached_line"
  SPLIT=$split
}

# wait_for_quiet SECONDS CMD... is wait_for without the failure: it returns 1.
wait_for_quiet() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# no_leases succeeds once $NS holds no Lease (deleting any there).
no_leases() {
  k -n "$NS" delete leases --all >/dev/null || return 1
  [ -z "$(k -n "$NS" get leases -o name)" ]
}

step "300 WebApps in 30 namespaces; three members launched together"
ring_workload registry.k8s.io/pause:3.10 | k apply --server-side --field-manager=faults-author -f - >/dev/null
# The members are forked first and held at a gate that releases them at
# once (launch_together): forking three one after the other took 442 ms in
# CI with another job on the second core, and the scenario then failed its
# own precondition without testing anything. The spread is measured
# between their releases, just before each execs stencil. Should even that
# be 100 ms or more, the set-up is started over, up to 3 times: the
# members killed, their Leases deleted (new members would count them as
# members until they expire), then launched again, so that each still sees
# few or none of the others at its first list.
for attempt in 1 2 3; do
  t0=$(now_ms)
  # shellcheck disable=SC2046
  launch_together "a b c" $(ring_flags)
  spread=$LAUNCH_SPREAD_MS
  ((spread >= 100)) || break
  ((attempt < 3)) || fail "the three members were released over ${spread} ms on each of 3 attempts; want under 100"
  echo "[$SCENARIO] attempt $attempt: the three members were released over ${spread} ms, want under 100: stopping them, launching again"
  for t in a b c; do kill_replica "$t"; done
  wait_for 30 "the stopped members' Leases to be deleted" no_leases
done
for t in a b c; do wait_replica_ready "$t"; done
wait_for 300 "all $TOTAL WebApps Ready" all_ready
ok "released within ${spread} ms (attempt $attempt); all $TOTAL Ready $(secs "$t0" "$(now_ms)")s after the launch"
check_members started-together a b c

step "member c gets kill -9: a and b take its namespaces within 20 s"
c_namespaces=$(awk '$2 == "c" { print $1 }' <<<"$SPLIT")
[ -n "$c_namespaces" ] || fail "member c wrote for no namespace"
kill_ms=$(now_ms)
kill_replica c
for ns in $c_namespaces; do
  k -n "$ns" patch webapp wa-00 --type merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
done
# shellcheck disable=SC2086 # one namespace per word
edited() { images_are wa-00 registry.k8s.io/pause:3.9 $c_namespaces; }
wait_for 60 "the edits in c's namespaces to reach their Deployments" edited
took=$(secs "$kill_ms" "$(now_ms)")
awk -v s="$took" 'BEGIN { exit !(s <= 20) }' || fail "c's namespaces served ${took}s after the kill; want at most 20 s (the 15 s Lease plus 5)"
ok "$(wc -w <<<"$c_namespaces") namespaces of c served again ${took}s after the kill"

step "c is replaced, then a rolling restart: a new member ready, then an old one SIGTERMed"
roll() {
  local old=$1 new=$2
  # shellcheck disable=SC2046
  start_replica "$new" $(ring_flags)
  signal_replica "$old" TERM
  wait_replica_exit "$old" 60
}
# c's replacement: a new pod, with a new identity.
# shellcheck disable=SC2046
start_replica f $(ring_flags)
check_members after-the-kill a b f
roll a d
roll b e
check_members after-a-rolling-restart d e f

figures "$RING_NAMING names; released within ${spread} ms (attempt $attempt); after the start, the kill and the rolling restart each member caches 20% to 45% of the $TOTAL WebApps ($CACHED_LINES) and none outside its share; each namespace written by the member that caches it; c's $(wc -w <<<"$c_namespaces") namespaces served again ${took}s after kill -9"
