package config

import (
	"fmt"
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
