//go:build integration

package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stencil.dev/stencil/test/hostile"
)

// renderDeadline is the hostile config's render deadline
// (renderBudget.timeoutSeconds, the default 5 s) plus one second: every
// stencil render of the corpus ends within it, counted from the process's
// start.
const renderDeadline = 6 * time.Second

// treeBound is what the whole process tree (stencil render and its render
// worker) may hold resident at once.
const treeBound = 512 << 20

// boundNamed is what a failed render of the corpus says: the budget's
// bound (template:line, renderBudget.<bound>) or the wall's (the worker
// killed, and at which bound).
var boundNamed = regexp.MustCompile(`(renderBudget\.[a-zA-Z]+|output exceeds \d+ bytes, the bound|render worker killed: .*(memoryMiB|timeoutSeconds|stringBytes|stack|panicked|crashed))`)

// TestHostileCorpus renders each resource of the hostile corpus
// (test/hostile) with the real binary, offline: each ends within the
// deadline plus a second, the process tree stays under 512 MiB resident,
// and a render that fails names its template and the bound; stencil
// itself never crashes. Run without a control plane: it is here because
// it needs bin/stencil, built without the race detector.
func TestHostileCorpus(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(root, "bin", "stencil"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "test", "hostile", "stencil.yaml")
	dir := t.TempDir()
	cases := append([]hostile.Case{hostile.Benign("benign", "Attack"), hostile.Benign("benign-chart", "ChartAttack")}, hostile.Cases()...)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cmd, stdout, stderr := renderCommand(t, bin, config, dir, c)
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The tree's peak is bounded from above exactly: stencil's own
			// peak (VmHWM, which only grows, read until it exits) plus the
			// largest peak of any process of the tree (wait4's maxrss, the
			// worker's when it is the larger). Sampling the tree's sum
			// would miss a spike between two samples.
			sampled, hwm := int64(0), int64(0)
			var werr error
		poll:
			for {
				select {
				case werr = <-done:
					break poll
				case <-time.After(2 * time.Millisecond):
					sampled = max(sampled, treeRSS(cmd.Process.Pid))
					hwm = max(hwm, procField(cmd.Process.Pid, "VmHWM:"))
				}
			}
			peak := hwm + maxRSS(cmd.ProcessState)
			took := time.Since(start)
			code := 0
			var exit *exec.ExitError
			switch {
			case errors.As(werr, &exit):
				code = exit.ExitCode()
			case werr != nil:
				t.Fatal(werr)
			}
			msg := lastLines(stderr.String())
			t.Logf("%s: exit %d in %v, process tree peak RSS at most %d MiB (sampled %d MiB), %d bytes out: %s", c.Name, code, took.Round(time.Millisecond), peak>>20, sampled>>20, stdout.Len(), msg)
			if strings.HasPrefix(c.Name, "benign") {
				if code != 0 || stdout.Len() == 0 {
					t.Fatalf("the benign resource did not render: exit %d: %s", code, stderr.String())
				}
				return
			}
			switch code {
			case 0:
				// Rendered within every bound: no longer an attack.
			case 1:
				if !boundNamed.MatchString(msg) || !strings.Contains(msg, "templates/") && !strings.Contains(msg, "chart") {
					t.Errorf("the failure names neither the template nor the bound: %s", msg)
				}
			default:
				t.Errorf("stencil render exited %d (crashed?): %s", code, stderr.String())
			}
			if took > renderDeadline+time.Second {
				t.Errorf("took %v, over the deadline plus a second (%v, and a second for the start)", took, renderDeadline)
			}
			if peak > treeBound {
				t.Errorf("process tree peak RSS %d MiB, over %d MiB", peak>>20, treeBound>>20)
			}
		})
	}
}

// renderCommand writes case c to dir and returns `stencil render` of it
// with config, its output captured.
func renderCommand(t *testing.T, bin, config, dir string, c hostile.Case) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	file := filepath.Join(dir, c.Name+".json")
	if err := os.WriteFile(file, c.Resource(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "render", "--config", config, "-f", file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// TestHostileSecrets renders, through the real binary, each resource of
// the corpus that tries to read the platform's secret (overrideValues)
// through the chart's tpl: the secret is in nothing stencil prints.
func TestHostileSecrets(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(root, "bin", "stencil"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "test", "hostile", "stencil.yaml")
	dir := t.TempDir()
	for _, c := range hostile.SecretCases() {
		t.Run(c.Name, func(t *testing.T) {
			cmd, stdout, stderr := renderCommand(t, bin, config, dir, c)
			err := cmd.Run()
			t.Logf("%s: %v, %d bytes out: %s", c.Name, err, stdout.Len(), lastLines(stderr.String()))
			if strings.Contains(stdout.String()+stderr.String(), hostile.PlatformSecret) {
				t.Errorf("the platform's secret is in what stencil render printed:\n%s\n%s", stdout.String(), stderr.String())
			}
			var exit *exec.ExitError
			if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
				t.Errorf("stencil render: %v (crashed?)", err)
			}
		})
	}
}

// treeRSS is the resident memory of pid and its children, in bytes.
func treeRSS(pid int) int64 {
	total := rss(pid)
	kids, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	for _, f := range strings.Fields(string(kids)) {
		if k, err := strconv.Atoi(f); err == nil {
			total += rss(k)
		}
	}
	return total
}

func rss(pid int) int64 { return procField(pid, "VmRSS:") }

// maxRSS is wait4's maxrss of a process that ended: the largest peak of
// it and its waited-for descendants, in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}

// procField reads a size field (kB) of /proc/PID/status, in bytes.
func procField(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// lastLines is what stencil render said, without klog's lines.
func lastLines(s string) string {
	var out []string
	for l := range strings.Lines(s) {
		if len(l) > 1 && (l[0] == 'I' || l[0] == 'W' || l[0] == 'E') && l[1] >= '0' && l[1] <= '9' {
			continue
		}
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, " ")
}
