package configtest

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"stencil.dev/stencil/templates/coverage"
)

// Summary counts results.
type Summary struct {
	Passed, Failed, Skipped, Updated int
	Took                             time.Duration
}

// Print writes one line per case that ran (PASS or FAIL, its failures
// below it) and the summary; it returns the counts.
func Print(w io.Writer, results []*Result, took time.Duration) Summary {
	s := Summary{Took: took}
	for _, r := range results {
		switch {
		case r.Skipped:
			s.Skipped++
			continue
		case r.Passed():
			s.Passed++
			fmt.Fprintf(w, "PASS %s (%s)\n", r.Case.ID(), r.Took.Round(time.Microsecond))
		default:
			s.Failed++
			fmt.Fprintf(w, "FAIL %s (%s)\n", r.Case.ID(), r.Took.Round(time.Microsecond))
			for _, f := range r.Failures {
				fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(f, "\n", "\n    "))
			}
		}
		if r.Updated {
			s.Updated++
			fmt.Fprintf(w, "     updated %s\n", r.Case.Golden)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed", s.Passed, s.Failed)
	if s.Skipped > 0 {
		fmt.Fprintf(w, ", %d skipped (-run)", s.Skipped)
	}
	if s.Updated > 0 {
		fmt.Fprintf(w, ", %d golden files updated", s.Updated)
	}
	fmt.Fprintf(w, " in %s\n", took.Round(time.Millisecond))
	return s
}

// JUnit XML, as CI systems read it: a testsuite per test file, a testcase
// per case, a failure with the case's failures.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Tests   int          `xml:"tests,attr"`
	Fail    int          `xml:"failures,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name    string      `xml:"name,attr"`
	Tests   int         `xml:"tests,attr"`
	Fail    int         `xml:"failures,attr"`
	Skipped int         `xml:"skipped,attr"`
	Time    string      `xml:"time,attr"`
	Cases   []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *struct{}     `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes results as JUnit XML to path.
func WriteJUnit(path string, results []*Result) error {
	out := junitSuites{}
	index := map[string]int{}
	for _, r := range results {
		file := r.Case.file
		i, ok := index[file]
		if !ok {
			i = len(out.Suites)
			index[file] = i
			out.Suites = append(out.Suites, junitSuite{Name: file})
		}
		suite := &out.Suites[i]
		c := junitCase{Name: r.Case.Name, Classname: file, Time: fmt.Sprintf("%.6f", r.Took.Seconds())}
		suite.Tests++
		out.Tests++
		switch {
		case r.Skipped:
			c.Skipped = &struct{}{}
			suite.Skipped++
		case !r.Passed():
			c.Failure = &junitFailure{Message: firstLine(r.Failures[0]), Text: strings.Join(r.Failures, "\n\n")}
			suite.Fail++
			out.Fail++
		}
		suite.Cases = append(suite.Cases, c)
	}
	for i := range out.Suites {
		var total time.Duration
		for _, r := range results {
			if r.Case.file == out.Suites[i].Name {
				total += r.Took
			}
		}
		out.Suites[i].Time = fmt.Sprintf("%.6f", total.Seconds())
	}
	data, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// PrintCoverage writes which branches of each template the cases took
// (templates.Coverage), the ones not taken by location, and the total; it
// returns the percentage taken (100 with no branch at all).
func PrintCoverage(w io.Writer, cov *coverage.Coverage) float64 {
	branches, taken := cov.Branches()
	type file struct {
		name        string
		total, took int
		missed      []string
	}
	var files []*file
	byName := map[string]*file{}
	total, took := 0, 0
	for i, b := range branches {
		f, ok := byName[b.Template]
		if !ok {
			f = &file{name: b.Template}
			byName[b.Template] = f
			files = append(files, f)
		}
		f.total++
		total++
		if taken[i] > 0 {
			f.took++
			took++
		} else {
			f.missed = append(f.missed, b.Location+": "+b.Kind)
		}
	}
	pct := func(a, b int) float64 {
		if b == 0 {
			return 100
		}
		return 100 * float64(a) / float64(b)
	}
	fmt.Fprintf(w, "coverage: %d of %d template branches taken (%.1f%%)\n", took, total, pct(took, total))
	for _, f := range files {
		fmt.Fprintf(w, "  %s: %d of %d (%.1f%%)\n", f.name, f.took, f.total, pct(f.took, f.total))
		for _, m := range f.missed {
			fmt.Fprintf(w, "    not taken: %s\n", m)
		}
	}
	return pct(took, total)
}
