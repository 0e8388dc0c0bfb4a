#!/usr/bin/env bash
# A ring of three replicas (stencil run --ring) splits 300 WebApps in 30
# namespaces, named as RING_NAMING says (sequential by default: NS-team-01
# ...; words; hex). Each resource is cached by exactly one member, each
# namespace written by exactly one, and each member caches and writes 20%
# to 45% of the WebApps. Then a member gets SIGKILL: the others take its
# namespaces once its Lease expires (15 s) and reflect spec edits there
# within 20 s. It comes back and joins again: the rebalance rewrites no
# converged resource. A namespace added to the 30 moves at most 3 of them
# between members (who writes each, before and after, at the proxy). Last,
# a member is paused (SIGSTOP) past its Lease: the others take its
# namespaces, and once resumed it writes nothing, its Lease included, and
# exits 1. ring-unfiltered.sh runs the same against an API server without
# sharded list and watch (stencil filters its watches itself), with hex
# names by default.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace "$SCENARIO"
# The members cache every WebApp of their share, cluster-wide. The earlier
# scenarios delete their namespaces without waiting (namespace-delete's 200
# WebApps, the other ring's 300): until the namespace controller is done
# with them, they are in the caches too, and the sum below is not 300
# (CI counted 400 and 417 before this wait). test/cluster/faults.sh waits
# for them between scenarios; this is for a run of this scenario alone.
# Before ring-unfiltered's API server restart below, not after: killing it
# while the namespace controller deletes them can set that back by up to a
# minute (the controller's retry backoff). (ring-unfiltered timed out in
# this wait once in CI, after ring-together had failed.)
wait_earlier_scenarios_gone

want_mode="the API server serves sharded list and watch"
if [ "${RING_UNFILTERED:-}" = 1 ]; then
  stop_component kube-apiserver KILL
  STENCIL_APISERVER_FEATURE_GATES="" restart_component kube-apiserver
  restore_apiserver() {
    stop_component kube-apiserver KILL
    restart_component kube-apiserver
  }
  defer restore_apiserver
  want_mode="the API server does not serve sharded list and watch"
fi
RING_NAMESPACES=30
PER_NAMESPACE=10
TOTAL=$((RING_NAMESPACES * PER_NAMESPACE))
RING_LABEL="faults.stencil.dev/ring=$NS"
# Cluster-wide: the members split every namespace between them.
FAULTS_SCOPE=""
ring_flags() { echo --ring faults --leader-elect-namespace "$NS"; }

mapfile -t all_names < <(ring_names "$NS" $((RING_NAMESPACES + 1)))
namespaces=("${all_names[@]:0:RING_NAMESPACES}")
for ns in "${namespaces[@]}"; do new_namespace "$ns"; done
echo "[$SCENARIO] ${RING_NAMING:-sequential} names: ${namespaces[0]} ... ${namespaces[RING_NAMESPACES - 1]}"

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

# ready_count prints how many of the ring's WebApps say Ready=True at their generation.
ready_count() {
  k get webapps -A -l "$RING_LABEL" -o \
    jsonpath='{range .items[*]}{.metadata.generation}={.status.observedGeneration}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk -F= '$1 == $2 && $3 == "True"' | wc -l
}
all_ready() { [ "$(ready_count)" = "$TOTAL" ]; }

# rmetric TAG NAME [MATCH] sums the series of NAME (whose labels contain MATCH) on replica TAG.
rmetric() {
  http_get "${RMETRICS[$1]}" /metrics | tr -d '\r' |
    awk -v m="$2" -v l="${3:-}" '($1 == m || index($1, m "{") == 1) && index($1, l) { s += $NF } END { printf "%g", s + 0 }'
}

# writers SINCE [UNTIL] prints, per ring namespace with writes (Leases
# aside), "namespace tags" (the replicas that wrote there, run together).
writers() {
  proxy_writes "$1" "${2:-}" | awk -v p="$NS-" '$4 != "leases" && index($5, p) == 1 && !seen[$5 " " $2]++ { w[$5] = w[$5] $2 }
    END { for (ns in w) print ns, w[ns] }' | sort
}

settled_on() {
  local tag=$1 members=$2
  [ "$(rmetric "$tag" stencil_ring_members)" = "$members" ] && [ "$(rmetric "$tag" stencil_ring_handovers_total)" != 0 ]
}

step "three members join; 300 WebApps in 30 namespaces"
for tag in a b c; do
  # shellcheck disable=SC2046
  start_replica "$tag" $(ring_flags)
done
ring_members_are() { local t; for t in a b c; do [ "$(rmetric "$t" stencil_ring_members)" = "$1" ] || return 1; done; }
wait_for 60 "every member to see 3 members" ring_members_are 3
grep -qi "$want_mode" "${RLOG[a]}" || fail "replica a's log does not say: $want_mode"
t0=$(now_ms)
ring_workload registry.k8s.io/pause:3.10 | k apply --server-side --field-manager=faults-author -f - >/dev/null
wait_for 300 "all $TOTAL WebApps Ready" all_ready
ready_ms=$(now_ms)
ok "all $TOTAL Ready $(secs "$t0" "$ready_ms")s after the apply"

step "each resource cached by one member, each namespace written by one, each member 20% to 45%"
cached=0
shares=""
split=$(writers "$t0" "$ready_ms")
for tag in a b c; do
  n=$(rmetric "$tag" stencil_cached_resources 'resource="webapps.apps.example.com"')
  wrote=$(awk -v t="$tag" '$2 == t' <<<"$split" | wc -l)
  ((n * 100 >= TOTAL * 20 && n * 100 <= TOTAL * 45)) || fail "member $tag caches $n of $TOTAL WebApps; want 20% to 45%"
  ((wrote * 100 >= RING_NAMESPACES * 20 && wrote * 100 <= RING_NAMESPACES * 45)) || fail "member $tag wrote in $wrote of $RING_NAMESPACES namespaces; want 20% to 45%"
  cached=$((cached + n))
  shares="$shares $tag: $n cached, $wrote namespaces written, $(rmetric "$tag" stencil_ring_namespaces) held (share $(awk -v s="$(rmetric "$tag" stencil_ring_share)" 'BEGIN { printf "%.0f%%", 100 * s }'));"
done
expect_eq "WebApps cached by the three members together" "$TOTAL" "$cached"
written=$(wc -l <<<"$split")
expect_eq "ring namespaces written" "$RING_NAMESPACES" "$written"
shared=$(awk 'length($2) > 1' <<<"$split")
[ -z "$shared" ] || fail "namespaces written by more than one member: $shared"
ok "${shares% ;} $written namespaces, each written by exactly one member"

step "member c gets SIGKILL; a and b take its namespaces"
c_namespaces=$(awk '$2 == "c" { print $1 }' <<<"$split")
[ -n "$c_namespaces" ] || fail "member c wrote for no namespace"
kill_ms=$(now_ms)
kill_replica c
for ns in $c_namespaces; do
  k -n "$ns" patch webapp wa-00 --type merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
done
# shellcheck disable=SC2086 # one namespace per word
edited() { images_are wa-00 registry.k8s.io/pause:3.9 $c_namespaces; }
wait_for 60 "the edits in c's namespaces to reach their Deployments" edited
healed_ms=$(now_ms)
took=$(secs "$kill_ms" "$healed_ms")
awk -v s="$took" 'BEGIN { exit !(s <= 20) }' || fail "c's namespaces served ${took}s after the kill; want at most 20 s (the 15 s Lease plus 5)"
after_kill=$(writers "$kill_ms" "$healed_ms")
shared=$(awk 'length($2) > 1 || $2 ~ /c/' <<<"$after_kill")
[ -z "$shared" ] || fail "after the kill, namespaces written by more than one member or by c: $shared"
kill_writes=$(proxy_writes "$kill_ms" "$healed_ms" | awk '$4 != "leases"' | wc -l)
ok "$(wc -w <<<"$c_namespaces") namespaces of c served again, spec edits reflected, ${took}s after the kill; $kill_writes writes meanwhile, Leases aside"

step "c joins again: the rebalance rewrites no converged resource"
wait_for 60 "all $TOTAL WebApps Ready" all_ready
join_ms=$(now_ms)
# shellcheck disable=SC2046
start_replica c $(ring_flags)
for tag in a b c; do wait_for 60 "$tag to settle on 3 members" settled_on "$tag" 3; done
settled_ms=$(now_ms)
sleep_until=$((settled_ms + 10000))
while (($(now_ms) < sleep_until)); do sleep 0.5; done
rewrites=$(proxy_writes "$join_ms" | awk '$4 != "leases" && $4 != "events" && $7 ~ /^2/' | wc -l)
expect_eq "writes other than Leases and events from the join to 10 s after it settled" 0 "$rewrites"
cached=0
for tag in a b c; do cached=$((cached + $(rmetric "$tag" stencil_cached_resources 'resource="webapps.apps.example.com"'))); done
expect_eq "WebApps cached by the three members after the join" "$TOTAL" "$cached"
ok "c joined; settled $(secs "$join_ms" "$settled_ms")s after it started; 0 rewrites"

step "a namespace added to the $RING_NAMESPACES moves at most 3 of them between members"
# who_writes N IMAGE edits wa-0N in every ring namespace and prints, once
# the edits reached the Deployments, "namespace tags" for who wrote there.
who_writes() {
  local n=$1 image=$2 since ns
  since=$(now_ms)
  for ns in "${namespaces[@]}"; do
    k -n "$ns" patch webapp "wa-0$n" --type merge -p "{\"spec\":{\"image\":\"$image\"}}" >/dev/null
  done
  wait_for 60 "the edits of wa-0$n to reach their Deployments" images_are "wa-0$n" "$image" "${namespaces[@]}"
  writers "$since"
}
# divided_by_all succeeds once the three members act on one view that
# divides every namespace of the cluster.
divided_by_all() {
  local t held=0 want
  want=$(k get namespaces -o name | wc -l)
  for t in a b c; do
    [ "$(rmetric "$t" stencil_ring_settled)" = 1 ] || return 1
    held=$((held + $(rmetric "$t" stencil_ring_namespaces)))
  done
  [ "$held" = "$want" ] || { echo "the members hold $held namespaces, the cluster has $want"; return 1; }
}
wait_for 60 "the members to divide every namespace" divided_by_all
before=$(who_writes 2 registry.k8s.io/pause:3.8)
added=${all_names[RING_NAMESPACES]}
new_namespace "$added"
add_ms=$(now_ms)
wait_for 60 "the members to divide $added too" divided_by_all
after=$(who_writes 3 registry.k8s.io/pause:3.8)
moved=$(join <(echo "$before") <(echo "$after") | awk '$2 != $3' | wc -l)
((moved <= 3)) || fail "adding $added moved $moved of the $RING_NAMESPACES namespaces between members; want at most 3: $(join <(echo "$before") <(echo "$after") | awk '$2 != $3' | tr '\n' ' ')"
expect_eq "namespaces written by more than one member after the add" "" "$(awk 'length($2) > 1' <<<"$after")"
ok "$added added: $moved of the $RING_NAMESPACES namespaces moved between members (divided by all three $(secs "$add_ms" "$(now_ms)")s after its create, edits included)"

step "member b is paused past its Lease; once resumed it writes nothing"
b_namespaces=$(awk '$2 == "b" { print $1 }' <<<"$(writers "$t0" "$ready_ms")")
pause_ms=$(now_ms)
signal_replica b STOP
for ns in $b_namespaces; do
  k -n "$ns" patch webapp wa-01 --type merge -p '{"spec":{"image":"registry.k8s.io/pause:3.9"}}' >/dev/null
done
# shellcheck disable=SC2086 # one namespace per word
b_edited() { images_are wa-01 registry.k8s.io/pause:3.9 $b_namespaces; }
wait_for 60 "the edits in b's namespaces to reach their Deployments" b_edited
b_healed_ms=$(now_ms)
# Paused past its Lease (15 s) whatever the handover took.
while (($(now_ms) < pause_ms + 20000)); do sleep 0.5; done
resume_ms=$(now_ms)
signal_replica b CONT
wait_replica_exit b 30
expect_eq "b's exit status after it resumed" 1 "${RRC[b]}"
b_after=$(proxy_writes "$resume_ms" "" b | wc -l)
expect_eq "writes by b after it resumed, its Lease included" 0 "$b_after"
pause_writes=$(proxy_writes "$pause_ms" "$b_healed_ms" | awk '$4 != "leases"' | wc -l)
ok "b's $(wc -w <<<"$b_namespaces") namespaces served by a and c $(secs "$pause_ms" "$b_healed_ms")s after the pause; b resumed after $(secs "$pause_ms" "$resume_ms")s: 0 writes, exit 1"

figures "${RING_NAMING:-sequential} names; 3 members, $TOTAL WebApps in $RING_NAMESPACES namespaces Ready in $(secs "$t0" "$ready_ms")s; ${shares% ;}; each namespace written by one member; c killed: its $(wc -w <<<"$c_namespaces") namespaces served again in ${took}s ($kill_writes writes, Leases aside); c rejoined: settled in $(secs "$join_ms" "$settled_ms")s, 0 rewrites; a 31st namespace moved $moved; b paused: its namespaces served again in $(secs "$pause_ms" "$b_healed_ms")s ($pause_writes writes, Leases aside), 0 writes after resuming, exit 1"
