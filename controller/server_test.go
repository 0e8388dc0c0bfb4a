package controller

import (
	"testing"
	"time"
)

func TestReadiness(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tests := []struct {
		name      string
		synced    bool
		standby   bool
		watchErr  time.Duration // how long ago a watch failed; 0: never
		wantReady bool
	}{
		{name: "caches not synced", wantReady: false},
		{name: "synced", synced: true, wantReady: true},
		{name: "watch failed 5s ago", synced: true, watchErr: 5 * time.Second, wantReady: false},
		{name: "watch failed 31s ago, recovered since", synced: true, watchErr: 31 * time.Second, wantReady: true},
		{name: "standby waiting for the Lease", standby: true, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h health
			h.started.Store(tt.synced)
			h.standby.Store(tt.standby)
			if tt.watchErr > 0 {
				h.watchFailed(now.Add(-tt.watchErr))
			}
			err := h.ready(now)
			if (err == nil) != tt.wantReady {
				t.Errorf("ready() = %v, want ready %v", err, tt.wantReady)
			}
		})
	}
}
