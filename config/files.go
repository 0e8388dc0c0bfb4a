package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// File is a file the config names, or a chart: a directory (every file
// under it) or an archive.
type File struct {
	// Field is the field that names it, e.g. resources[0].templates[1].
	Field string
	// Path is the file as resolved against the config's directory.
	Path string
	// Chart says Path is a chart: a directory is every file under it.
	Chart bool
}

// Files lists what the config names, in config order: each entry's
// helpers, templates, status template and chart. It is the one list of
// them: the reload poll hashes these files and "stencil manifests" packs
// them, so a field missed here is missed by both, and their test (package
// install) catches it. The config file itself is not in it.
func (c *Config) Files() []File {
	var out []File
	for i, r := range c.Resources {
		entry := fmt.Sprintf("resources[%d].", i)
		for j, h := range r.Helpers {
			out = append(out, File{Field: fmt.Sprintf("%shelpers[%d]", entry, j), Path: c.TemplatePath(h)})
		}
		for j, t := range r.Templates {
			out = append(out, File{Field: fmt.Sprintf("%stemplates[%d]", entry, j), Path: c.TemplatePath(t.Path)})
		}
		if r.StatusTemplate != "" {
			out = append(out, File{Field: entry + "statusTemplate", Path: c.TemplatePath(r.StatusTemplate)})
		}
		if r.Chart != "" {
			out = append(out, File{Field: entry + "chart", Path: c.TemplatePath(r.Chart), Chart: true})
		}
	}
	return slices.Clip(out)
}

// ChartFiles lists the files of the chart at root as Helm's loader reads
// them: the archive itself, or every file under the directory with
// symlinks followed (a symlinked directory is walked under the link's own
// path), sorted. A directory reached twice through links (a loop) is
// walked once.
func ChartFiles(root string) ([]string, error) {
	return walkChart(root, nil)
}

// walkChart lists the files under root as ChartFiles does, leaving out
// what skip says (given the path relative to root, with slashes): a
// directory skipped is not walked.
func walkChart(root string, skip func(rel string, fi fs.FileInfo) bool) ([]string, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{root}, nil
	}
	var out []string
	seen := map[string]bool{}
	var walk func(dir string) error
	walk = func(dir string) error {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return err
		}
		if seen[real] {
			return nil
		}
		seen[real] = true
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			st, err := os.Stat(p) // follows a link
			if err != nil {
				return err
			}
			if skip != nil {
				rel, _ := filepath.Rel(root, p)
				if skip(filepath.ToSlash(rel), st) {
					continue
				}
			}
			if st.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			out = append(out, p)
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
