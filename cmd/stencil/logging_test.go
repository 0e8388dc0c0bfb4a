package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestJSONLogging checks --logging-format=json: one JSON object per line,
// with the message as "msg" and the same keys and values as the text logs.
func TestJSONLogging(t *testing.T) {
	var buf bytes.Buffer
	if err := setupLogging(loggingJSON, 2, &buf); err != nil {
		t.Fatal(err)
	}
	defer klog.ClearLogger()
	logger := klog.LoggerWithValues(klog.Background(), "gvr", "apps.example.com/v1beta1, Resource=webapps")
	logger.Info("Starting stencil", "version", "dev", "resources", 2, "object", klog.KRef("ns", "demo"))
	logger.Error(errors.New("boom"), "Applying child", "kind", "Deployment")
	logger.V(2).Info("Shown at -v 2")
	logger.V(3).Info("Not shown at -v 2")
	klog.Flush()

	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	var entries []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not one JSON object: %q: %v", l, err)
		}
		entries = append(entries, m)
	}
	want := map[string]any{
		"msg": "Starting stencil", "version": "dev", "resources": float64(2),
		"object": map[string]any{"name": "demo", "namespace": "ns"},
		"gvr":    "apps.example.com/v1beta1, Resource=webapps",
	}
	for k, v := range want {
		got, _ := json.Marshal(entries[0][k])
		w, _ := json.Marshal(v)
		if string(got) != string(w) {
			t.Errorf("%s = %s, want %s (line %s)", k, got, w, lines[0])
		}
	}
	if entries[1]["msg"] != "Applying child" || entries[1]["err"] != "boom" || entries[1]["kind"] != "Deployment" {
		t.Errorf("error line %s: want msg, err and kind", lines[1])
	}
	if entries[2]["msg"] != "Shown at -v 2" {
		t.Errorf("third line %s, want the V(2) line", lines[2])
	}
}

// TestLoggingFormatRefused checks that an unknown format is an error.
func TestLoggingFormatRefused(t *testing.T) {
	if err := setupLogging("yaml", 0, &bytes.Buffer{}); err == nil {
		t.Error("--logging-format yaml accepted")
	}
	if err := setupLogging(loggingText, 0, &bytes.Buffer{}); err != nil {
		t.Errorf("text: %v", err)
	}
}

// TestRunFlagsLoggingFormat checks --logging-format and that -v reaches
// the JSON logger.
func TestRunFlagsLoggingFormat(t *testing.T) {
	var stderr bytes.Buffer
	f, _, done := parseRunFlags([]string{"--config", "c.yaml", "--logging-format=json", "-v", "4"}, &stderr)
	if done || f.loggingFormat != loggingJSON || f.verbosity != 4 {
		t.Errorf("format %q, verbosity %d (done %v: %s), want json, 4", f.loggingFormat, f.verbosity, done, stderr.String())
	}
	if _, status, done := parseRunFlags([]string{"--config", "c.yaml", "--logging-format=yaml"}, &stderr); !done || status != 2 {
		t.Errorf("--logging-format=yaml: status %d, done %v; want 2", status, done)
	}
}
