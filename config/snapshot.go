package config

import (
	"fmt"
	"os"

	"stencil.dev/stencil/config/snapshot"
)

// TakeSnapshot reads the config file at path (a watches file when
// watches) and every file it names, once (package config/snapshot). A
// named file that is missing or unreadable is recorded as such; compiling
// the snapshot reports it. Only the config file itself failing to read is
// an error here.
func TakeSnapshot(path string, watches bool) (*snapshot.Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if watches {
			return nil, fmt.Errorf("reading watches: %w", err)
		}
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return snapshotOf(path, watches, data), nil
}

// snapshotOf is TakeSnapshot for a config file already read: what it
// names is read whether or not it validates (loading the snapshot
// validates), from a watches file that parses or a config that decodes.
func snapshotOf(path string, watches bool, data []byte) *snapshot.Snapshot {
	var named []snapshot.Named
	var charts map[string]string
	if watches {
		// A watches file that does not parse names no charts; loading
		// the snapshot reports it.
		ws, _ := parseWatches(path, data)
		for _, w := range ws {
			if w.Chart == "" {
				continue
			}
			if charts == nil {
				charts = map[string]string{}
			}
			resolved := watchedChart(path, w.Chart, exists)
			charts[w.Chart] = resolved
			named = append(named, snapshot.Named{Path: resolved, Chart: true})
		}
	} else if cfg, _, _, err := decodeConfig(path, data); err == nil {
		for _, f := range cfg.Files() {
			named = append(named, snapshot.Named{Path: f.Path, Chart: f.Chart})
		}
	}
	return snapshot.Take(path, watches, data, named, charts)
}
