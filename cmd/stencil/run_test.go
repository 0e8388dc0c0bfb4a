package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"stencil.dev/stencil/controller/ha"
)

// TestRunFlagsKubebuilderNames checks kubebuilder's flag names and the
// names before them, which still work for one release and warn once.
func TestRunFlagsKubebuilderNames(t *testing.T) {
	for _, tc := range []struct {
		name          string
		args          []string
		metrics, hlth string
		warnings      []string
	}{
		{"defaults", nil, ":8080", ":8081", nil},
		{"kubebuilder's names", []string{"--metrics-bind-address", "127.0.0.1:9090", "--health-probe-bind-address=:9091"}, "127.0.0.1:9090", ":9091", nil},
		{"the old names", []string{"--metrics-addr", "127.0.0.1:9090", "--health-addr=:9091"}, "127.0.0.1:9090", ":9091",
			[]string{"--metrics-addr is deprecated", "--health-addr is deprecated"}},
		{"an old name twice warns once", []string{"--metrics-addr", ":1", "--metrics-addr", ""}, "", ":8081",
			[]string{"--metrics-addr is deprecated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, status, done := parseRunFlags(append([]string{"--config", "stencil.yaml"}, tc.args...), &stderr)
			if done {
				t.Fatalf("parse ended with status %d: %s", status, stderr.String())
			}
			if f.metricsAddr != tc.metrics || f.healthAddr != tc.hlth {
				t.Errorf("metrics %q, health %q; want %q, %q", f.metricsAddr, f.healthAddr, tc.metrics, tc.hlth)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(tc.warnings) == 0 {
				lines = nil
				if stderr.Len() > 0 {
					t.Errorf("stderr: %s, want nothing", stderr.String())
				}
			}
			if len(lines) != len(tc.warnings) {
				t.Fatalf("stderr has %d lines, want %d: %s", len(lines), len(tc.warnings), stderr.String())
			}
			for i, w := range tc.warnings {
				if !strings.Contains(lines[i], w) {
					t.Errorf("warning %d: %q, want it to say %q", i, lines[i], w)
				}
			}
		})
	}
}

// TestRunFlagsLeaseTimings checks that the lease timings reach the flags
// and that timings leader election cannot work with end with status 2.
func TestRunFlagsLeaseTimings(t *testing.T) {
	var stderr bytes.Buffer
	f, _, done := parseRunFlags([]string{"--config", "c.yaml"}, &stderr)
	if done || f.lease != ha.DefaultTimings {
		t.Errorf("default timings %+v (done %v), want %+v", f.lease, done, ha.DefaultTimings)
	}
	f, _, done = parseRunFlags([]string{"--config", "c.yaml", "--leader-elect-lease-duration=60s",
		"--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s"}, &stderr)
	if want := (ha.Timings{Lease: time.Minute, Renew: 40 * time.Second, Retry: 5 * time.Second}); done || f.lease != want {
		t.Errorf("timings %+v (done %v), want %+v", f.lease, done, want)
	}
	for _, args := range [][]string{
		{"--leader-elect-lease-duration=10s"}, // not longer than the renew deadline
		{"--leader-elect-renew-deadline=2s"},  // not longer than the retry period with jitter
		{"--leader-elect-retry-period=0s"},
		{"--leader-elect-retry-period=-1s"},
	} {
		stderr.Reset()
		_, status, done := parseRunFlags(append([]string{"--config", "c.yaml"}, args...), &stderr)
		if !done || status != 2 || !strings.Contains(stderr.String(), "--leader-elect-lease-duration") {
			t.Errorf("%s: status %d (done %v), stderr %q; want 2 and a message naming the flags", args, status, done, stderr.String())
		}
	}
}

// TestRunHelpHidesOldNames checks that -h lists kubebuilder's names only.
func TestRunHelpHidesOldNames(t *testing.T) {
	var stderr bytes.Buffer
	if _, status, done := parseRunFlags([]string{"-h"}, &stderr); !done || status != 0 {
		t.Fatalf("-h: status %d, done %v", status, done)
	}
	help := stderr.String()
	for _, name := range []string{"-metrics-bind-address", "-health-probe-bind-address", "-leader-elect-lease-duration", "-leader-elect-renew-deadline", "-leader-elect-retry-period"} {
		if !strings.Contains(help, name) {
			t.Errorf("-h does not list %s", name)
		}
	}
	for _, name := range []string{"-metrics-addr ", "-health-addr "} {
		if strings.Contains(help, name) {
			t.Errorf("-h lists the deprecated %s", name)
		}
	}
}

// TestRunHelpHidesKlogFlags checks that -h lists -v and -vmodule of klog's
// flags, --help-all every one, and that the hidden ones still parse.
func TestRunHelpHidesKlogFlags(t *testing.T) {
	var help, all bytes.Buffer
	parseRunFlags([]string{"-h"}, &help)
	if _, status, done := parseRunFlags([]string{"--help-all"}, &all); !done || status != 0 {
		t.Fatalf("--help-all: status %d, done %v", status, done)
	}
	for _, name := range []string{"  -v value", "  -vmodule value"} {
		if !strings.Contains(help.String(), name) {
			t.Errorf("-h does not list %q", name)
		}
	}
	for _, name := range []string{"  -logtostderr", "  -log_file ", "  -skip_headers", "  -add_dir_header"} {
		if strings.Contains(help.String(), name) {
			t.Errorf("-h lists klog's %q", name)
		}
		if !strings.Contains(all.String(), name) {
			t.Errorf("--help-all does not list %q", name)
		}
	}
	if strings.Contains(all.String(), "-metrics-addr ") {
		t.Error("--help-all lists the deprecated --metrics-addr")
	}
	var stderr bytes.Buffer
	if _, status, done := parseRunFlags([]string{"--config", "c.yaml", "-v=2", "--vmodule=sync=4", "--logtostderr=true", "--add_dir_header=false"}, &stderr); done {
		t.Errorf("klog's flags: status %d: %s", status, stderr.String())
	}
}
