package snapshot

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

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
