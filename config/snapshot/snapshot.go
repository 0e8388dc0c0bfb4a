// Package snapshot holds every file one load of a stencil config reads,
// read from disk once: the config (or watches) file, each template,
// helper and status template, and each chart packed as Helm's loader reads
// it. The config, its compile and every render worker of that load read
// these bytes and nothing else.
//
// The choice a newcomer may question: a chart directory is packed into an
// in-memory .tgz, and a missing file is recorded rather than refused,
// instead of the load reading the disk as it goes. What runs must never
// depend on what the disk holds later (an edit a reload refused, a config
// directory deleted after the load, a ConfigMap volume swapped under a
// render worker), and one value, named by its digest, is what the
// controller hands each worker: the worker checks the digest, it does not
// re-read and hope for the same files.
package snapshot

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

// Snapshot is every file one load of a config reads, read from disk once
// (Take). A snapshot is immutable once taken; Digest names it. It is JSON
// so that the controller can hand it to a render worker in the worker's
// first frame.
type Snapshot struct {
	// Path is the config file, or the watches file (Watches).
	Path    string `json:"path"`
	Watches bool   `json:"watches,omitempty"`
	// Config is the bytes of Path.
	Config []byte `json:"config"`
	// Files are the files the config names, by resolved path
	// (config.Config.TemplatePath, or a watch's chart as helm-operator
	// resolves it).
	Files map[string]*File `json:"files,omitempty"`
	// Charts resolves a watches file's chart paths as written to the
	// path they were found at when the snapshot was taken.
	Charts map[string]string `json:"charts,omitempty"`
	// Digest is the sha256 of everything above: the snapshot's name.
	Digest string `json:"digest"`
}

// File is one named file or chart as it was on disk.
type File struct {
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

// Named is a file or chart a config names, as resolved against the
// config's directory.
type Named struct {
	// Path is the file or chart.
	Path string
	// Chart says Path is a chart: a directory is packed as Helm's loader
	// reads it, an archive taken as it is.
	Chart bool
}

// Take returns the snapshot of a config file's bytes, data, read from path
// (a watches file when watches), and of each file and chart it names,
// read from disk now, once: a path named twice is taken the first time.
// charts maps a watches file's chart paths, as written, to the path they
// were resolved to. A named file that is missing or unreadable is recorded
// as such; loading the snapshot reports it.
func Take(path string, watches bool, data []byte, named []Named, charts map[string]string) *Snapshot {
	s := &Snapshot{Path: path, Watches: watches, Config: data, Files: map[string]*File{}, Charts: charts}
	for _, f := range named {
		if _, ok := s.Files[f.Path]; ok {
			continue
		}
		if f.Chart {
			s.Files[f.Path] = captureChart(f.Path)
		} else {
			s.Files[f.Path] = captureFile(f.Path)
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

// Stat says what the snapshot knows of path, for the checks a config
// makes of a file it names: a path it did not take is Missing.
func (s *Snapshot) Stat(path string) *File {
	if f, ok := s.Files[path]; ok {
		return f
	}
	return &File{Missing: true}
}

// captureFile reads one named file.
func captureFile(path string) *File {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &File{Missing: true}
	case err != nil:
		return &File{Err: err.Error()}
	case !st.Mode().IsRegular():
		return &File{Irregular: true}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return &File{Err: err.Error()}
	}
	return &File{Data: data}
}

// captureChart reads a chart: an archive's bytes, or a directory packed
// as Helm's directory loader would read it (.helmignore and Helm's
// default rules applied, symlinks followed, a UTF-8 BOM kept for the
// loader to trim).
func captureChart(path string) *File {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		// An archive, or what is not a chart at all: as any named file.
		return captureFile(path)
	}
	f := &File{Dir: true}
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
