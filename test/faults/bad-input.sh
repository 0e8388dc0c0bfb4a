#!/usr/bin/env bash
# Bad input from a custom resource author, next to the 200 good resources.
# What the API server refuses never reaches stencil (the CRD schemas prune
# or refuse unknown fields, labels and names are validated); what it
# accepts ends in a clear status naming the field: RenderFailed or
# ApplyFailed (Stalled, never retried), or Progressing with the cluster's
# own reason, and never a panic or a retry storm.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace bad-input
start_replica a
pid=${RPID[a]}
apply_workload 1

# webapp NAME IMAGE REPLICAS [LABELS] prints a WebApp.
webapp() {
  printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: %s, labels: {%s}}\nspec: {image: "%s", replicas: %d}\n' \
    "$1" "${4:-}" "$2" "$3"
}
good='faults.stencil.dev/workload: "true"'
# padded N prints an image reference N bytes long.
padded() { printf 'registry.k8s.io/pause:%s' "$(head -c $(($1 - 22)) /dev/zero | tr '\0' 'a')"; }
refused=()
# refuse WHAT WANT YAML...: the API server must refuse it, saying WANT.
refuse() {
  local what=$1 want=$2 out
  shift 2
  out=$("$@" 2>&1) && fail "$what: the API server accepted it"
  [[ "$out" == *"$want"* ]] || fail "$what: refused, but not for '$want': $out"
  refused+=("$what: ${out:0:150}")
}

step "refused by the API server: never reaches stencil"
refuse "unicode in a label" 'metadata.labels: Invalid value' \
  kn create -f - <<<"$(webapp wa-unicode-label registry.k8s.io/pause:3.10 1 'team: "ünïcödé"')"
refuse "unicode in a name" 'metadata.name: Invalid value' \
  kn create -f - <<<"$(webapp wa-ünï registry.k8s.io/pause:3.10 1)"
deep=$(printf '{"a":%.0s' $(seq 1 100))1$(printf '}%.0s' $(seq 1 100))
deep_json() {
  printf '{"apiVersion":"apps.example.com/v1beta1","kind":"WebApp","metadata":{"name":"wa-deep","labels":{"faults.stencil.dev/workload":"true"}},"spec":{"image":"registry.k8s.io/pause:3.10","replicas":1,"deep":%s}}' "$deep"
}
refuse "a spec nested 100 deep (strict field validation)" 'unknown field "spec.deep"' kn create -f - <<<"$(deep_json)"
refuse "nodePort with serviceType ClusterIP (the CRD's CEL rule)" 'nodePort needs serviceType NodePort' \
  kn create -f - <<<"$(printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: wa-np-cip}\nspec: {image: x, nodePort: 30001}\n')"
# Without strict validation the nesting is pruned: the resource is stored
# (and reconciled) without it.
create_once kn create --validate=false -f - <<<"$(deep_json)" >/dev/null
expect_eq "spec.deep as stored" "" "$(kn get webapp wa-deep -o jsonpath='{.spec.deep}')"
refused+=("a spec nested 100 deep, without strict validation: stored pruned to the schema (no spec.deep)")
ok "${#refused[@]} inputs refused or pruned by the API server"

step "accepted by the API server: a clear status naming the field, no retry"
# The largest WebApp etcd stores, measured in a namespace whose name is as
# long as this one's (not watched by stencil): objects are stored with
# their namespace, and the limit is etcd's (1.5 MiB per value).
probe="faults-bad-probe-${NS##*-}"
new_namespace "$probe"
lo=1500000 hi=1600000
while ((hi - lo > 50)); do
  mid=$(((lo + hi) / 2))
  if webapp too-big "$(padded "$mid")" 0 | create_once k -n "$probe" create -f - >/dev/null 2>&1; then
    lo=$mid
    k -n "$probe" delete webapp too-big --ignore-not-found >/dev/null ||
      wait_for 30 "the probe WebApp to be deleted" k -n "$probe" delete webapp too-big --ignore-not-found
  else
    hi=$mid
  fi
done
# 1150 bytes under it: the WebApp and its status fit, its Deployment (the
# same image with more metadata) does not.
too_big=$((lo - 1150))
long_wa=$(printf 'w%.0s' $(seq 1 253))
long_mc=$(printf 'm%.0s' $(seq 1 253))
np=$((30000 + RANDOM % 2700))
{
  webapp "$long_wa" registry.k8s.io/pause:3.10 1
  echo ---
  printf 'apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: %s}\nspec: {size: 1}\n---\n' "$long_mc"
  webapp wa-big-1mib "$(padded 1048576)" 0 "$good"
  echo ---
  # 1.1 MiB of settings: the WebApp is stored, its ConfigMap is over the
  # 1 MiB a ConfigMap may hold.
  printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: wa-big-config}\nspec: {image: registry.k8s.io/pause:3.10, replicas: 1, config: {A: "%s", B: "%s"}}\n---\n' \
    "$(head -c 600000 /dev/zero | tr '\0' 'a')" "$(head -c 600000 /dev/zero | tr '\0' 'b')"
  webapp too-big "$(padded "$too_big")" 0
  echo ---
  webapp wa-space-image " registry.k8s.io/pause:3.10" 1
  echo ---
  webapp wa-unicode-image "registry.k8s.io/pause:3.10-ünïcödé" 1 "$good"
  echo ---
  printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: wa-np-a, labels: {%s}}\nspec: {image: registry.k8s.io/pause:3.10, replicas: 1, serviceType: NodePort, nodePort: %d}\n' "$good" "$np"
} | create_once kn create -f - >/dev/null
kn wait webapp/wa-np-a --for=condition=Ready --timeout=120s >/dev/null
printf 'apiVersion: apps.example.com/v1beta1\nkind: WebApp\nmetadata: {name: wa-np-b}\nspec: {image: registry.k8s.io/pause:3.10, replicas: 1, serviceType: NodePort, nodePort: %d}\n' "$np" |
  create_once kn create -f - >/dev/null
WORKLOAD=$((WORKLOAD + 4)) wait_recovered 300
ready_message() { kn get "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
# says KIND/NAME REASON TEXT... waits for Ready=False REASON with a message
# holding every TEXT.
says() {
  local obj=$1 reason=$2 got t
  shift 2
  got=$(ready_reason "$obj")
  [ "$got" = "False $reason" ] || { echo "$obj: Ready is '$got', want 'False $reason'"; return 1; }
  got=$(ready_message "$obj")
  for t in "$@"; do
    [[ "$got" == *"$t"* ]] || { echo "$obj: message '${got:0:300}' lacks '$t'"; return 1; }
  done
}
wait_for 60 "the 253-character WebApp to fail to render" says "webapp/$long_wa" RenderFailed \
  'label app.kubernetes.io/instance=' 'must be no more than 63' 'Service name'
wait_for 60 "the 253-character Memcached to fail to render" says "memcached/$long_mc" RenderFailed \
  'label app.kubernetes.io/instance=' 'must be no more than 63'
wait_for 60 "the 1.5 MiB WebApp's Deployment to be refused" says webapp/too-big ApplyFailed \
  'applying Deployment/too-big' 'etcdserver: request is too large'
wait_for 60 "the 1.1 MiB config to be refused" says webapp/wa-big-config ApplyFailed \
  'applying ConfigMap/wa-big-config-config' 'Too long: may not be more than 1048576 bytes'
wait_for 60 "the second nodePort to be refused" says webapp/wa-np-b ApplyFailed \
  'Service/wa-np-b' "spec.ports[0].nodePort: Invalid value: $np" 'already allocated'
wait_for 120 "the image with a space to be reported" says webapp/wa-space-image Progressing \
  'spec.containers[0].image' 'must not have leading or trailing whitespace'
RECOVERED_MS=$(now_ms)
ok "every bad input reported"

step "no panic, no restart, no retry: each failing child applied at most once"
expect_eq "stencil's pid" "$pid" "${RPID[a]}"
replica_alive a || fail "stencil exited"
panics=$(grep -c -i 'panic' "${RLOG[a]}" || true)
expect_eq "panics in the log" 0 "$panics"
# A refused child is sent once per render: the syncs that its siblings'
# events bring (a Deployment created, its status written by its controller,
# the resource's own status) report the remembered refusal without sending it
# again; only a new render or the periodic resync (10 min) sends it again.
# Before that memo, 3 to 4 sends each, depending on how many status updates
# the sibling Deployment got.
sends=$(proxy_writes 0 | awk '($6 == "too-big" && $4 == "deployments") || ($6 == "wa-np-b" && $4 == "services") || ($6 == "wa-big-config-config" && $4 == "configmaps") { n[$4 "/" $6]++ }
  END { for (k in n) printf "%s %d\n", k, n[k] }')
awk '$2 != 1 { bad = bad $0 "; " } END { if (bad != "") { print bad; exit 1 } }' <<<"$sends" >/dev/null ||
  fail "retry storm: refused children not sent exactly once: $sends"
sends=$(tr '\n' ' ' <<<"$sends")
ok "same pid $pid, 0 panics; refused children sent: $sends(want 1 each)"

QUIET_REPLICAS=a quiet_window --expect "$long_wa=RenderFailed" --expect "$long_mc=RenderFailed" \
  --expect too-big=ApplyFailed --expect wa-np-b=ApplyFailed --expect wa-big-config=ApplyFailed --expect wa-space-image=Progressing
for r in "${refused[@]}"; do echo "[$SCENARIO] refused: $r"; done
figures "${#refused[@]} inputs refused or pruned by the API server (unicode label, unicode name, 100-deep spec, nodePort with ClusterIP; pruned without strict validation); RenderFailed for 253-character names (WebApp, Memcached), ApplyFailed (Stalled) for a 1.1 MiB spec.config (its ConfigMap: Too long), a $((too_big / 1024)) KiB spec (etcd: request is too large) and a taken nodePort, Progressing naming spec.containers[0].image for an image with a space; a 1 MiB spec and a unicode image Ready; refused children sent ${sends}times (want 1 each), 0 panics, same pid; $QUIET_FIGS; $CHECKED"
