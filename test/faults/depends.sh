#!/usr/bin/env bash
# Children that depend on each other, on the example AppStack
# (crds/appstack: the app's template dependsOn the database's and reads the
# database Service's cluster IP with observed; the status template reads
# the app Service's load-balancer ingress). Writes are counted at the proxy.
#   1. A database whose pods cannot be scheduled (a node selector no node
#      matches) holds the app back: Ready False, WaitingForDependency, the
#      message naming the app template and the database's Deployment; no
#      app Deployment or Service exists.
#   2. Once it can be scheduled, the app appears with the database
#      Service's clusterIP in its env. Creating the AppStack cost each of
#      its four children one create; the only update is the database
#      Deployment's, whose node selector was removed.
#   3. The app's Service made a LoadBalancer, and an ingress patched onto
#      it by hand (as a cloud would): the ingress appears in
#      status.endpoint.
#   4. The database made unready again, with a spec change pending for the
#      app (replicas 2 -> 3): stencil writes neither the app's Deployment
#      nor its Service (counted at the proxy; the Deployment's generation
#      unchanged), and the status says WaitingForDependency again.
#   5. Converged: no write in a quiet window; a restart writes nothing.
# shellcheck source=test/faults/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace depends
start_replica a

stack=shop
appstack() { kn get "appstack/$stack" -o jsonpath="$1"; }
waiting_for() {
  local got
  got="$(condition "appstack/$stack" Ready reason) $(condition "appstack/$stack" Ready message)"
  [[ "$got" == "WaitingForDependency app waits for $1"* ]] || { echo "Ready: $got"; return 1; }
}
absent() { ! kn get "$1" -o name >/dev/null 2>&1; }

step "a database that cannot be scheduled holds the app back"
created_ms=$(now_ms)
create_once kn apply -f - >/dev/null <<EOF
apiVersion: stacks.example.com/v1alpha1
kind: AppStack
metadata: {name: $stack}
spec:
  image: registry.k8s.io/pause:3.10
  replicas: 2
  dbNodeSelector: {stencil.dev/nowhere: "true"}
EOF
wait_for 60 "WaitingForDependency naming Deployment/$stack-db" waiting_for "Deployment/$stack-db, which is not ready"
absent "deployment/$stack" || fail "the app's Deployment exists while its database is not ready"
absent "service/$stack" || fail "the app's Service exists while its database is not ready"
ok "Ready False: $(condition "appstack/$stack" Ready message); Reconciling $(condition "appstack/$stack" Reconciling status); no app Deployment or Service"

step "the database can be scheduled: the app appears with the database Service's cluster IP"
kn patch "appstack/$stack" --type=json -p '[{"op": "remove", "path": "/spec/dbNodeSelector"}]' >/dev/null
db_ip=$(kn get "service/$stack-db" -o jsonpath='{.spec.clusterIP}')
[ -n "$db_ip" ] || fail "service/$stack-db has no cluster IP"
app_env() { kn get "deployment/$stack" -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="DB_HOST")].value}'; }
app_env_is() { [ "$(app_env)" = "$1" ] || { echo "DB_HOST is '$(app_env)'"; return 1; }; }
wait_for 90 "deployment/$stack with DB_HOST=$db_ip" app_env_is "$db_ip"
wait_for 90 "appstack/$stack Ready" expect_ready_reason "appstack/$stack" "True AllChildrenReady"
writes=$(child_writes "$created_ms")
printf '%s\n' "$writes" | sed "s/^/[$SCENARIO]   /"
# The database's Deployment is updated once: its node selector was removed.
expect_eq "children written (resource name creates updates lost)" \
  "$(printf 'deployments %s 1 0 0\ndeployments %s-db 1 1 0\nservices %s 1 0 0\nservices %s-db 1 0 0' "$stack" "$stack" "$stack" "$stack")" "$writes"
ok "DB_HOST=$(app_env) (service/$stack-db's cluster IP); 4 children, each created once; the app's never updated, the database's Deployment once (its node selector removed); Ready True"

step "a load-balancer ingress patched onto the app's Service shows in status.endpoint"
endpoint_before=$(appstack '{.status.endpoint}')
kn patch "appstack/$stack" --type=merge -p '{"spec": {"serviceType": "LoadBalancer"}}' >/dev/null
service_type_is() { [ "$(kn get "service/$stack" -o jsonpath='{.spec.type}')" = "$1" ]; }
wait_for 60 "service/$stack of type LoadBalancer" service_type_is LoadBalancer
# As a cloud's load-balancer controller would (the API server takes an
# ingress only on a LoadBalancer Service).
kn patch "service/$stack" --subresource=status --type=merge -p '{"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}' >/dev/null
endpoint_is() { [ "$(appstack '{.status.endpoint}')" = "$1" ] || { echo "endpoint is '$(appstack '{.status.endpoint}')'"; return 1; }; }
wait_for 60 "status.endpoint 203.0.113.7:8080" endpoint_is "203.0.113.7:8080"
wait_for 60 "appstack/$stack Ready" expect_ready_reason "appstack/$stack" "True AllChildrenReady"
ok "status.endpoint $endpoint_before (the cluster address), then $(appstack '{.status.endpoint}') from the patched ingress; Ready True"

step "the database unready again, with a spec change pending: the app is left exactly as it was"
gen() { kn get "$1" -o jsonpath='{.metadata.generation}'; }
app_gen=$(gen "deployment/$stack")
unready_ms=$(now_ms)
kn patch "appstack/$stack" --type=merge -p '{"spec": {"replicas": 3, "dbNodeSelector": {"stencil.dev/nowhere": "true"}}}' >/dev/null
wait_for 90 "WaitingForDependency naming Deployment/$stack-db" waiting_for "Deployment/$stack-db, which is not ready"
app_writes=$(proxy_writes "$unready_ms" "" | awk -v a="$stack" '$6 == a && ($4 == "deployments" || $4 == "services")' | wc -l)
expect_eq "stencil's writes to deployment/$stack and service/$stack while the database is unready" 0 "$app_writes"
expect_eq "deployment/$stack generation (its spec unchanged)" "$app_gen" "$(gen "deployment/$stack")"
expect_eq "deployment/$stack replicas (the pending change not applied)" 2 "$(kn get "deployment/$stack" -o jsonpath='{.spec.replicas}')"
ok "0 writes to the app's Deployment and Service, its generation still $app_gen, replicas 2; $(condition "appstack/$stack" Ready message)"

step "the database back: the pending change applied, then no write in 20 s, and none after a restart"
kn patch "appstack/$stack" --type=json -p '[{"op": "remove", "path": "/spec/dbNodeSelector"}]' >/dev/null
replicas_are() { [ "$(kn get "deployment/$stack" -o jsonpath='{.spec.replicas}')" = "$1" ]; }
wait_for 90 "deployment/$stack replicas 3" replicas_are 3
wait_for 90 "appstack/$stack Ready" expect_ready_reason "appstack/$stack" "True AllChildrenReady"
# A measurement window, not a wait for a condition: from 5 s after Ready
# (the pods' own status updates have reached stencil by then) for 20 s.
quiet_from=$(($(now_ms) + 5000))
sleep 25
s=$(proxy_summary "$quiet_from" "$((quiet_from + 20000))")
converged=$(($(fig child "$s") + $(fig status "$s") + $(fig event "$s")))
expect_eq "writes in 20 s once converged (child, status, event)" 0 "$converged"
signal_replica a TERM
wait_replica_exit a 30
restarted=$(now_ms)
start_replica a
wait_for 60 "appstack/$stack still Ready after the restart" expect_ready_reason "appstack/$stack" "True AllChildrenReady"
# A measurement window: the restarted replica syncs every resource as its
# caches fill; 15 s covers that and any requeue it would schedule.
sleep 15
s=$(proxy_summary "$restarted" "$(now_ms)")
after=$(($(fig child "$s") + $(fig status "$s") + $(fig event "$s")))
expect_eq "writes in the 15 s after a restart (child, status, event)" 0 "$after"
figures "app waited for Deployment/$stack-db twice (0 writes to it meanwhile); 4 children created once each; DB_HOST $db_ip; endpoint from a hand-patched ingress; 0 writes converged (20 s), 0 after a restart (15 s)"
