// Package monitoring holds only tests: they keep the manifests of
// deploy/monitoring consistent. rules.yaml is the one source of the alert
// rules (promtool checks it in make monitoring-check); prometheusrule.yaml is
// generated from it, and `go test ./deploy/monitoring -update` rewrites it.
package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml from rules.yaml")

const crHeader = `# Generated from rules.yaml by go test ./deploy/monitoring -update: edit
# rules.yaml, not this file. See rules.yaml for what each alert means.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: stencil
spec:
`

// prometheusRule wraps the rules file in a PrometheusRule: its leading
// comment is dropped and the rest indented under spec, so that comments in
// the rules stay where they are.
func prometheusRule(rules []byte) []byte {
	lines := strings.Split(strings.TrimRight(string(rules), "\n"), "\n")
	for len(lines) > 0 && (strings.HasPrefix(lines[0], "#") || strings.TrimSpace(lines[0]) == "") {
		lines = lines[1:]
	}
	var b bytes.Buffer
	b.WriteString(crHeader)
	for _, l := range lines {
		if l != "" {
			b.WriteString("  ")
			b.WriteString(l)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestPrometheusRuleMatchesRules proves that the PrometheusRule's
// spec.groups are the groups of rules.yaml, which promtool checks: the file
// is exactly what the generator makes, and both parse to the same groups.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	rules, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := prometheusRule(rules)
	if *update {
		if err := os.WriteFile("prometheusrule.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("prometheusrule.yaml is not generated from rules.yaml: run go test ./deploy/monitoring -update")
	}

	plain := readYAML(t, "rules.yaml")
	if len(plain) != 1 || plain["groups"] == nil {
		t.Fatalf("rules.yaml: want only a top-level groups key, got %v", keys(plain))
	}
	cr := readYAML(t, "prometheusrule.yaml")
	spec, _ := cr["spec"].(map[string]any)
	if cr["kind"] != "PrometheusRule" || len(spec) != 1 {
		t.Fatalf("prometheusrule.yaml: want a PrometheusRule whose spec has only groups, got kind %v, spec keys %v", cr["kind"], keys(spec))
	}
	if !reflect.DeepEqual(spec["groups"], plain["groups"]) {
		t.Errorf("prometheusrule.yaml spec.groups differ from rules.yaml groups")
	}
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatal(err)
	}
	var all []rule
	for _, g := range f.Groups {
		all = append(all, g.Rules...)
	}
	return all
}

// TestAlertsDocumented requires every alert to say how bad it is and what to
// do: a severity, a summary and a description.
func TestAlertsDocumented(t *testing.T) {
	rules := loadRules(t)
	if len(rules) == 0 {
		t.Fatal("rules.yaml has no rules")
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
	}
}

// knownMetrics are the series stencil exports (docs/operating.md "Endpoints and metrics", controller/metrics.go,
// client-go's workqueue and REST client metrics, the Go and process
// collectors) and Prometheus's own up.
var knownMetrics = map[string]bool{
	"up":                                                   true,
	"stencil_reconcile_total":                              true,
	"stencil_reconcile_duration_seconds":                   true,
	"stencil_child_writes_total":                           true,
	"stencil_status_patches_total":                         true,
	"stencil_render_errors_total":                          true,
	"stencil_drift_dry_runs_total":                         true,
	"stencil_resource_served":                              true,
	"stencil_rollout_resources":                            true,
	"stencil_rollout_halted":                               true,
	"stencil_ring_cached_outside_share":                    true,
	"stencil_ring_members":                                 true,
	"stencil_ring_settled":                                 true,
	"stencil_ring_namespaces":                              true,
	"stencil_ring_share":                                   true,
	"stencil_cached_resources":                             true,
	"stencil_config_last_reload_successful":                true,
	"stencil_config_last_reload_success_timestamp_seconds": true,
	"stencil_build_info":                                   true,
	"stencil_leader":                                       true,
	"workqueue_depth":                                      true,
	"workqueue_adds_total":                                 true,
	"workqueue_retries_total":                              true,
	"workqueue_queue_duration_seconds":                     true,
	"workqueue_work_duration_seconds":                      true,
	"workqueue_unfinished_work_seconds":                    true,
	"workqueue_longest_running_processor_seconds":          true,
	"rest_client_requests_total":                           true,
	"rest_client_request_duration_seconds":                 true,
	"process_cpu_seconds_total":                            true,
	"process_resident_memory_bytes":                        true,
	"go_goroutines":                                        true,
}

var metricName = regexp.MustCompile(`\b(?:up|(?:stencil|workqueue|rest_client|process|go)_[a-z0-9_]+)\b`)

// checkMetricNames reports every metric an expression uses that stencil does
// not export, so that a typo cannot make an alert or a panel silently empty.
func checkMetricNames(t *testing.T, where, expr string) {
	t.Helper()
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && knownMetrics[b] {
				base = b
			}
		}
		if !knownMetrics[base] {
			t.Errorf("%s uses %s, which stencil does not export", where, name)
		}
	}
}

func TestRulesUseKnownMetrics(t *testing.T) {
	for _, r := range loadRules(t) {
		checkMetricNames(t, "alert "+r.Alert+r.Record, r.Expr)
	}
}

// TestDashboard checks that dashboard.json is a Grafana dashboard whose
// panels query only stencil's metrics through the datasource variable.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title      string `json:"title"`
			Type       string `json:"type"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard.json: uid %q, title %q: both must be set", d.UID, d.Title)
	}
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource must be the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			checkMetricNames(t, "panel "+p.Title, q.Expr)
		}
	}
	if queries == 0 {
		t.Error("dashboard.json has no queries")
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
