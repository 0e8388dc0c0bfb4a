#!/usr/bin/env bash
# One config from file to worker: every render worker compiles the
# snapshot of the config stencil loaded, never what the disk holds now, and
# a worker lost to something outside the render costs its resource
# nothing. stencil runs with --workers 2 --config-poll 1s and --manage-crds
# (the WebApp CRD is generated from the config) from a copy of its binary:
#   - an invalid edit of stencil.yaml made before any resource exists, then
#     every worker killed: a WebApp created afterwards becomes Ready;
#   - the same edit with workers killed (SIGKILL, as the OOM killer sends
#     it): a spec edit is rendered within 5 s, Ready stays True, nothing
#     is Stalled; the fixed file is taken at the next poll;
#   - a valid reload, then 10 s idle: every worker process left names the
#     new snapshot (STENCIL_RENDER_SNAPSHOT in its environment) and none
#     the old; one compile per load (stencil_config_compiles_total);
#   - idle workers killed before each of three spec edits: each is
#     rendered, nothing Stalled, no render blamed (renders_killed 0);
#   - a reload that adds a schema field and a template that uses it: a
#     WebApp setting the field has it in its ConfigMap within 5 s, with
#     no restart;
#   - no worker can start (stencil's binary moved away, the workers
#     killed): the resource says RenderUnavailable within 10 s, never
#     Stalled, and recovers on its own once the binary is back;
#   - a worker SIGKILLed from outside in the middle of a slow render (a
#     template that spends a few seconds of CPU when the spec asks): the
#     render runs again in a new worker, the resource is Ready within 30 s,
#     never Stalled, and no render is blamed.
# shellcheck source=test/smoke/lib.sh
source "$(dirname "$0")/lib.sh"

use_namespace snapshot
install_crds
copy_config
cfg="$CONFIG_DIR/stencil.yaml"
cp "$cfg" "$CONFIG_DIR/stencil.yaml.good"
# The WebApp CRD is the config's: put back as crds/ has it when done (the
# reload below adds a field, which stencil's apply owns).
defer "$KUBECTL" apply --server-side --force-conflicts -f "$smoke_root/crds/webapp-crd.yaml"
bin_dir=$(mktemp -d)
defer rm -rf "$bin_dir"
cp "$STENCIL" "$bin_dir/stencil"
STENCIL="$bin_dir/stencil" start_stencil --config "$cfg" --workers 2 --config-poll 1s --manage-crds

# workers prints the pids of the running controller's live render workers
# (a killed idle worker stays a zombie until stencil next looks at it).
workers() {
  local p
  for p in $(pgrep -P "$STENCIL_PID" || true); do
    [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" = Z ] || echo "$p"
  done
}
# kill_workers SIGKILLs every worker and waits until none is left.
kill_workers() {
  local p
  for p in $(workers); do kill -KILL "$p" 2>/dev/null || true; done
  wait_for 10 "the killed workers to be gone" no_workers
}
no_workers() { [ -z "$(workers)" ]; }
has_workers() { [ -n "$(workers)" ]; }
# snapshots prints the snapshot digest each worker names, sorted, once each.
snapshots() {
  local p
  for p in $(workers); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^STENCIL_RENDER_SNAPSHOT=//p'; done | sort -u
}
refused() { [ "$(metric stencil_config_last_reload_successful)" = 0 ]; }
taken() { [ "$(metric stencil_config_last_reload_successful)" = 1 ]; }
never_stalled() {
  local s
  s=$(condition webapp/demo Stalled status)
  [ "$s" != True ] || fail "webapp/demo is Stalled: $(condition webapp/demo Ready message)"
}
replicas_are() { [ "$(kn get deployment/demo -o jsonpath='{.spec.replicas}')" = "$1" ]; }
compiles0=$(metric stencil_config_compiles_total)
expect_eq "stencil_config_compiles_total at start" 1 "$compiles0"

step "an invalid edit before any resource exists, workers killed: a WebApp created afterwards becomes Ready"
echo "resources: [ this is not yaml" >"$cfg"
wait_for 30 "the invalid edit refused" refused
kill_workers
apply_samples_ready webapp
never_stalled
ok "webapp/demo Ready under the running config, with the edit on disk refused"

step "the invalid edit, then every worker killed: a spec edit is rendered within 5 s"
wait_for 30 "a worker" has_workers
kill_workers
kn patch webapp/demo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
t0=$EPOCHREALTIME
wait_for 5 "deployment/demo at 3 replicas" replicas_are 3
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
kn wait webapp/demo --for=condition=Ready --timeout=30s >/dev/null
never_stalled
ok "spec edit rendered in ${ms} ms with the file on disk invalid and the workers killed; Ready True"

step "the fixed file is taken at the next poll"
cp "$CONFIG_DIR/stencil.yaml.good" "$cfg"
wait_for 10 "the fixed config taken" taken
ok "stencil_config_last_reload_successful 1"

step "a valid reload, then 10 s idle: every worker serves the new snapshot"
old=$(snapshots)
[ -n "$old" ] || { kn patch webapp/demo --type merge -p '{"spec":{"replicas":2}}' >/dev/null; wait_for 10 "a worker" has_workers; old=$(snapshots); }
compiles1=$(metric stencil_config_compiles_total)
sed -i 's|app.kubernetes.io/component: server|app.kubernetes.io/component: frontend|' "$CONFIG_DIR/webapp/service.yaml.tmpl"
relabelled() { [ "$(kn get service/demo -o jsonpath='{.metadata.labels.app\.kubernetes\.io/component}')" = frontend ]; }
wait_for 30 "service/demo relabelled by the reload" relabelled
compiles2=$(metric stencil_config_compiles_total)
((compiles2 == compiles1 + 1)) || fail "stencil_config_compiles_total went from $compiles1 to $compiles2 for one reload"
new_only() {
  local s
  s=$(snapshots)
  [ -n "$s" ] && [ "$(wc -l <<<"$s")" = 1 ] && [ "$s" != "$old" ]
}
wait_for 10 "every worker on one snapshot, not the old one" new_only
for i in $(seq 1 10); do
  new_only || fail "after ${i} s idle, workers serve: $(snapshots | tr '\n' ' ') (old: $old)"
  sleep 1
done
ok "after 10 s idle every worker ($(workers | wc -l)) names snapshot $(snapshots | cut -c1-12), not ${old:0:12}; one compile for the reload ($compiles1 -> $compiles2)"

step "idle workers killed before each of three spec edits: each rendered, nothing Stalled"
killed0=$(metric stencil_renders_killed_total)
for n in 4 5 2; do
  wait_for 10 "an idle worker" has_workers
  kill_workers
  kn patch webapp/demo --type merge -p "{\"spec\":{\"replicas\":$n}}" >/dev/null
  wait_for 10 "deployment/demo at $n replicas" replicas_are "$n"
  never_stalled
done
kn wait webapp/demo --for=condition=Ready --timeout=30s >/dev/null
expect_eq "stencil_renders_killed_total (no render blamed)" "$killed0" "$(metric stencil_renders_killed_total)"
ok "three edits rendered after idle workers were killed; Ready True; $(metric stencil_render_worker_exits_total) worker exits counted, 0 renders blamed"

step "a reload adding a schema field and a template that uses it: the child has it within 5 s"
sed -i 's#^        image: string | required=true#        motto: string | maxLength=64 description="A motto, rendered into the ConfigMap."\n&#' "$cfg"
grep -q "motto: string" "$cfg" || fail "could not add spec.motto to the schema"
# shellcheck disable=SC2016 # template text, not shell
sed -i 's#^  {{- range $k, $v := .Spec.config }}#  {{- if hasKey .Spec "motto" }}\n  MOTTO: {{ .Spec.motto | quote }}\n  {{- end }}\n&#' "$CONFIG_DIR/webapp/configmap.yaml.tmpl"
grep -q MOTTO "$CONFIG_DIR/webapp/configmap.yaml.tmpl" || fail "could not add MOTTO to the template"
has_motto_field() { k get crd webapps.apps.example.com -o jsonpath='{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.motto.type}' | grep -q string; }
wait_for 30 "the CRD with spec.motto" has_motto_field
wait_for 30 "the reload taken" taken
pid=$STENCIL_PID
# The API server serves a CRD's new schema a moment after the CRD
# changes, and prunes an unknown field meanwhile: the patch is made again
# until the field is stored; the 5 s count from then.
stored_motto() {
  kn patch webapp/demo --type merge -p '{"spec":{"motto":"fortune favours the bold"}}' >/dev/null
  [ -n "$(kn get webapp/demo -o jsonpath='{.spec.motto}')" ]
}
wait_for 30 "spec.motto stored" stored_motto
t0=$EPOCHREALTIME
motto() { [ "$(kn get configmap/demo-config -o jsonpath='{.data.MOTTO}')" = "fortune favours the bold" ]; }
wait_for 5 "configmap/demo-config MOTTO" motto
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
if [ "$pid" != "$STENCIL_PID" ] || ! kill -0 "$pid"; then fail "stencil restarted"; fi
ok "spec.motto in configmap/demo-config ${ms} ms after the edit, same pid $pid"

step "no worker can start: the resource says so within 10 s, and recovers on its own"
mv "$bin_dir/stencil" "$bin_dir/stencil.away"
kill_workers
kn patch webapp/demo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
unavailable() { expect_ready_reason webapp/demo "False RenderUnavailable"; }
wait_for 10 "webapp/demo RenderUnavailable" unavailable
never_stalled
msg=$(condition webapp/demo Ready message)
mv "$bin_dir/stencil.away" "$bin_dir/stencil"
wait_for 60 "deployment/demo at 3 replicas" replicas_are 3
kn wait webapp/demo --for=condition=Ready --timeout=60s >/dev/null
ok "RenderUnavailable (${msg:0:160}); recovered with the binary back"

step "the config put back: the CRD loses spec.motto"
cp "$CONFIG_DIR/stencil.yaml.good" "$cfg"
no_motto_field() { ! has_motto_field; }
wait_for 30 "the CRD without spec.motto" no_motto_field
ok "CRD as crds/ has it"

step "a worker SIGKILLed in the middle of a slow render: Ready within 30 s, never Stalled, nothing blamed"
# A few seconds of one core when spec.config.SLOW is set: 9 million turns
# of an empty loop, within a budget the entry raises for it.
cat >"$CONFIG_DIR/webapp/slow.yaml.tmpl" <<'EOF'
{{- if hasKey (get .Spec "config" dict) "SLOW" }}
{{- range until 3000 }}{{ range until 3000 }}{{ end }}{{ end }}
{{- end }}
EOF
sed -i 's#^      - webapp/hpa.yaml.tmpl$#&\n      - webapp/slow.yaml.tmpl#' "$cfg"
sed -i 's#^    statusTemplate: webapp/status.yaml.tmpl$#&\n    renderBudget: {steps: 30000000, timeoutSeconds: 20}#' "$cfg"
grep -q 'renderBudget: {steps: 30000000' "$cfg" || fail "could not raise the budget"
grep -q slow.yaml.tmpl "$cfg" || fail "could not add the slow template"
wait_for 30 "the reload with the slow template taken" taken
killed0=$(metric stencil_renders_killed_total)
# cpu_ticks PID prints the process's user plus system time in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# kill_busy kills the first worker busy with the slow render: one that
# has used 30 ticks (0.3 s) of CPU since the edit, or, started after it,
# 50 ticks in all (its start, the snapshot's compile, takes a few). It
# runs in wait_for's subshell: what it knows of the workers before the
# edit is in seen_ticks, set here.
declare -A seen_ticks=()
kill_busy() {
  local p t base
  for p in $(workers); do
    t=$(cpu_ticks "$p")
    base=${seen_ticks[$p]:-}
    if { [ -n "$base" ] && ((t - base >= 30)); } || { [ -z "$base" ] && ((t >= 50)); }; then
      kill -KILL "$p"
      echo "killed worker $p at $t ticks"
      return 0
    fi
  done
  return 1
}
for p in $(workers); do seen_ticks[$p]=$(cpu_ticks "$p"); done
kn patch webapp/demo --type merge -p '{"spec":{"config":{"SLOW":"1"}}}' >/dev/null
t0=$EPOCHREALTIME
wait_for 20 "a worker busy with the slow render" kill_busy
slow_done() {
  [ "$(kn get configmap/demo-config -o jsonpath='{.data.SLOW}')" = 1 ] && expect_ready_reason webapp/demo "True AllChildrenReady"
}
wait_for 30 "the slow render's ConfigMap written and webapp/demo Ready" slow_done
ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
never_stalled
expect_eq "stencil_renders_killed_total (no render blamed)" "$killed0" "$(metric stencil_renders_killed_total)"
ok "the slow render's worker killed mid-render; rendered again and Ready ${ms} ms after the edit; not Stalled, nothing blamed"
