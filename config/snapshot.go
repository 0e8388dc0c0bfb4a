package config

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"helm.sh/helm/v4/pkg/ignore"
)

// Snapshot is every file one load of a config reads, read from disk once:
// the config (or watches) file, each template, helper and status
// template, and each chart packed as Helm's loader reads it. The config,
// its compile and every render worker of that load read these bytes and
// nothing else, so what runs never depends on what the disk holds later:
// an edit refused by a reload, or a config directory deleted after the
// load, changes nothing the running generation needs.
//
// A snapshot is immutable once taken; Digest names it. It is JSON so that
// the controller can hand it to a render worker in the worker's first
// frame.
type Snapshot struct {
	// Path is the config file, or the watches file (Watches).
	Path    string `json:"path"`
	Watches bool   `json:"watches,omitempty"`
	// Config is the bytes of Path.
	Config []byte `json:"config"`
	// Files are the files the config names, by resolved path
	// (Config.TemplatePath, or a watch's chart as helm-operator resolves
	// it).
	Files map[string]*SnapshotFile `json:"files,omitempty"`
	// Charts resolves a watches file's chart paths as written to the
	// path they were found at when the snapshot was taken.
	Charts map[string]string `json:"charts,omitempty"`
	// Digest is the sha256 of everything above: the snapshot's name.
	Digest string `json:"digest"`
}

// SnapshotFile is one named file or chart as it was on disk.
type SnapshotFile struct {
	// Data is a file's bytes; for a chart, a gzipped tar of it as Helm's
	// loader reads a chart directory (.helmignore applied) or the
	// archive itself.
	Data []byte `json:"data,omitempty"`
	// Missing says there was no such file; Irregular that it was neither
	// a regular file nor (for a chart) a directory.
	Missing   bool `json:"missing,omitempty"`
	Irregular bool `json:"irregular,omitempty"`
	// Dir says a chart was a directory; NoChartYAML that it held no
	// Chart.yaml.
	Dir         bool `json:"dir,omitempty"`
	NoChartYAML bool `json:"noChartYAML,omitempty"`
	// Err is why it could not be read, when it could not.
	Err string `json:"err,omitempty"`
}

// TakeSnapshot reads the config file at path (a watches file when
// watches) and every file it names, once. A named file that is missing
// or unreadable is recorded as such; compiling the snapshot reports it.
// Only the config file itself failing to read is an error here.
func TakeSnapshot(path string, watches bool) (*Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if watches {
			return nil, fmt.Errorf("reading watches: %w", err)
		}
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return snapshotOf(path, watches, data), nil
}

// snapshotOf is TakeSnapshot for a config file already read.
func snapshotOf(path string, watches bool, data []byte) *Snapshot {
	s := &Snapshot{Path: path, Watches: watches, Config: data, Files: map[string]*SnapshotFile{}}
	if watches {
		// A watches file that does not parse names no charts; loading
		// the snapshot reports it.
		ws, _ := parseWatches(path, data)
		for _, w := range ws {
			if w.Chart == "" {
				continue
			}
			if s.Charts == nil {
				s.Charts = map[string]string{}
			}
			resolved := watchedChart(path, w.Chart, exists)
			s.Charts[w.Chart] = resolved
			s.Files[resolved] = captureChart(resolved)
		}
	} else if cfg, _, _, err := decodeConfig(path, data); err == nil {
		// Decoded only: what the config names is read whether or not
		// it validates; loading the snapshot validates.
		for _, f := range cfg.Files() {
			if _, ok := s.Files[f.Path]; ok {
				continue
			}
			if f.Chart {
				s.Files[f.Path] = captureChart(f.Path)
			} else {
				s.Files[f.Path] = captureFile(f.Path)
			}
		}
	}
	s.Digest = s.digest()
	return s
}

// digest hashes the snapshot's content in a fixed order.
func (s *Snapshot) digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%t\x00%d\x00", s.Path, s.Watches, len(s.Config))
	h.Write(s.Config)
	for _, name := range slices.Sorted(maps.Keys(s.Files)) {
		f := s.Files[name]
		fmt.Fprintf(h, "%s\x00%t%t%t%t\x00%s\x00%d\x00", name, f.Missing, f.Irregular, f.Dir, f.NoChartYAML, f.Err, len(f.Data))
		h.Write(f.Data)
	}
	for _, c := range slices.Sorted(maps.Keys(s.Charts)) {
		fmt.Fprintf(h, "%s\x00%s\x00", c, s.Charts[c])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks that s is what its Digest names: a snapshot handed over a
// pipe, or decoded from JSON, is the one the controller took.
func (s *Snapshot) Verify() error {
	if got := s.digest(); got != s.Digest {
		return fmt.Errorf("config snapshot %s of %s does not match its content (%s)", s.Digest, s.Path, got)
	}
	return nil
}

// ReadFile returns the named file's bytes as the snapshot holds them.
func (s *Snapshot) ReadFile(path string) ([]byte, error) {
	f, ok := s.Files[path]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: not in the config's snapshot (stencil read only the files the config names)", path)
	case f.Missing:
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	case f.Err != "":
		return nil, fmt.Errorf("%s: %s", path, f.Err)
	case f.Irregular || f.Dir:
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f.Data, nil
}

// ChartArchive returns the chart at path as a gzipped tar that Helm's
// loader.LoadArchive reads.
func (s *Snapshot) ChartArchive(path string) ([]byte, error) {
	f, ok := s.Files[path]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: not in the config's snapshot (stencil read only the charts the config names)", path)
	case f.Missing:
		return nil, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
	case f.Err != "":
		return nil, errors.New(f.Err)
	case f.Irregular:
		return nil, fmt.Errorf("%s is neither a chart directory nor a .tgz", path)
	}
	return f.Data, nil
}

// stat says what the snapshot knows of path, for the checks validate
// makes of a named file (checkRegularFile, checkChart).
func (s *Snapshot) stat(path string) *SnapshotFile {
	if f, ok := s.Files[path]; ok {
		return f
	}
	return &SnapshotFile{Missing: true}
}

// captureFile reads one named file.
func captureFile(path string) *SnapshotFile {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &SnapshotFile{Missing: true}
	case err != nil:
		return &SnapshotFile{Err: err.Error()}
	case !st.Mode().IsRegular():
		return &SnapshotFile{Irregular: true}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return &SnapshotFile{Err: err.Error()}
	}
	return &SnapshotFile{Data: data}
}

// captureChart reads a chart: an archive's bytes, or a directory packed
// as Helm's directory loader would read it (.helmignore and Helm's
// default rules applied, symlinks followed, a UTF-8 BOM kept for the
// loader to trim).
func captureChart(path string) *SnapshotFile {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		// An archive, or what is not a chart at all: as any named file.
		return captureFile(path)
	}
	f := &SnapshotFile{Dir: true}
	if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err != nil {
		f.NoChartYAML = true
		return f
	}
	data, err := packChart(path)
	if err != nil {
		f.Err = fmt.Sprintf("loading chart %s: %v", path, err)
		return f
	}
	f.Data = data
	return f
}

// packChart packs the chart directory root into a gzipped tar under one
// top directory, as helm package lays it out.
func packChart(root string) ([]byte, error) {
	rules := ignore.Empty()
	if data, err := os.ReadFile(filepath.Join(root, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
	}
	rules.AddDefaults()
	files, err := walkChart(root, func(rel string, fi fs.FileInfo) bool { return rules.Ignore(rel, fi) })
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	top := filepath.Base(root)
	for _, name := range files {
		st, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("cannot load irregular file %s as it has file mode type bits set", name)
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, name)
		hdr := &tar.Header{Name: top + "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no files in chart directory")
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
