#!/usr/bin/env bash
# The config and templates are reloaded from disk without a restart: a
# template edit changes the children (same PID); a broken config is
# rejected whole (the old one keeps serving, stencil_config_last_reload_
# successful 0); fixing it is taken (metric 1).
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace reload
install_crds
copy_config
start_stencil --config "$CONFIG_DIR/stencil.yaml" --config-poll 1s
pid=$STENCIL_PID
apply_samples_ready webapp
expect_eq "stencil_config_last_reload_successful at start" 1 "$(metric stencil_config_last_reload_successful)"

step "a template edited on disk changes the child, in the same process"
t0=$EPOCHREALTIME
sed -i 's|app.kubernetes.io/component: server|app.kubernetes.io/component: frontend|' "$CONFIG_DIR/webapp/service.yaml.tmpl"
relabelled() { [ "$(kn get service/demo -o jsonpath='{.metadata.labels.app\.kubernetes\.io/component}')" = frontend ]; }
wait_for 30 "service/demo to carry the new label" relabelled
edit_ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
kill -0 "$pid" || fail "stencil exited"
expect_eq "stencil_config_last_reload_successful" 1 "$(metric stencil_config_last_reload_successful)"
ok "template edit on disk -> service/demo updated in ${edit_ms} ms (poll every 1s), same pid $pid"

step "a label removed from the template disappears from the child"
# Server-side apply drops what stencil's apply entry held and the new render
# no longer sets.
sed -i '/app.kubernetes.io\/component: frontend/d' "$CONFIG_DIR/webapp/service.yaml.tmpl"
unlabelled() { [ -z "$(kn get service/demo -o jsonpath='{.metadata.labels.app\.kubernetes\.io/component}')" ]; }
wait_for 30 "the component label to leave service/demo" unlabelled
sed -i 's|^    app.kubernetes.io/instance: {{ .Name \| quote }}$|&\n    app.kubernetes.io/component: frontend|' "$CONFIG_DIR/webapp/service.yaml.tmpl"
wait_for 30 "service/demo to carry the label again" relabelled
ok "label removed from the template: gone from service/demo; put back: back"

step "a broken config is rejected whole; the old one keeps serving"
cp "$CONFIG_DIR/stencil.yaml" "$CONFIG_DIR/stencil.yaml.good"
sed -i 's|resource: webapps |resource: WebApps |; s|resource: webapps$|resource: WebApps|' "$CONFIG_DIR/stencil.yaml"
rejected() { [ "$(metric stencil_config_last_reload_successful)" = 0 ]; }
wait_for 30 "stencil_config_last_reload_successful 0" rejected
grep -q "Config reload rejected.*stencil.yaml: resources\[0\].*resource" "$STENCIL_LOG" ||
  fail "the rejection does not name the file, entry and field: $(grep 'reload rejected' "$STENCIL_LOG" | tail -1)"
kn patch webapp/demo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
gen2() { [ "$(kn get webapp/demo -o jsonpath='{.status.observedGeneration}')" = 2 ]; }
wait_for 30 "webapp/demo to observe generation 2 under the old config" gen2
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
relabelled || fail "service/demo lost the label of the running config"
ok "rejected ($(grep -o 'stencil.yaml: resources\[0\][^"]*' "$STENCIL_LOG" | tail -1 | cut -c1-120)); webapp/demo still reconciled"

step "the config fixed is taken"
cp "$CONFIG_DIR/stencil.yaml.good" "$CONFIG_DIR/stencil.yaml"
taken() { [ "$(metric stencil_config_last_reload_successful)" = 1 ]; }
wait_for 30 "stencil_config_last_reload_successful 1" taken
kill -0 "$pid" || fail "stencil exited"
ok "metric back to 1, same pid $pid"
