// Package reload re-reads stencil's config file and templates when they
// change on disk or on SIGHUP, and hands each new version, fully validated,
// to the controller; the controller never reads files itself.
//
// The choice a newcomer may question: files are polled by content, not
// watched with inotify. The kubelet updates a ConfigMap volume by swapping a
// symlink (..data) to a new directory, which inotify on the files
// themselves does not report, and a poll of a few small files every few
// seconds costs nothing.
package reload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/snapshot"
	"stencil.dev/stencil/renderworker"
	"stencil.dev/stencil/templates"
)

// Apply takes a new, validated config and its parsed templates. An error
// keeps the running config (the swap is all or nothing).
type Apply func(ctx context.Context, cfg *config.Config, sets []*templates.Set) error

// Source is where the config comes from: a stencil config file, or
// helm-operator's watches.yaml (chart entries, each kind's plural
// resolved through discovery).
type Source struct {
	// Path is the config file, or the watches file.
	Path string
	// Watches says Path is a watches.yaml; Resolve finds the plurals.
	Watches bool
	Resolve config.PluralResolver
	// Options are given to templates.LoadAll: the cluster's capabilities,
	// which a chart sees.
	Options templates.Options
	// Wall, when set, renders every set Load returns in its workers
	// (package renderworker), which load the same files.
	Wall *renderworker.Pool
	// DefaultIdentity, when set (run --default-identity), is the identity
	// of every entry that names none: given to each config as it loads
	// (config.WithDefaultIdentity), at start and on every reload.
	DefaultIdentity *config.Identity
}

// Load takes a snapshot of the source's files (config.TakeSnapshot) and
// compiles it: every check "stencil validate" makes. With a Wall, every
// set renders in workers that compile the same snapshot, never the disk.
func (s Source) Load() (*config.Config, []*templates.Set, error) {
	snap, err := config.TakeSnapshot(s.Path, s.Watches)
	if err != nil {
		return nil, nil, err
	}
	return s.Compile(snap)
}

// Compile compiles snap, once: the config validated, its templates parsed
// and its charts loaded, from the snapshot's bytes. With a Wall, the sets
// are attached to it (Attach).
func (s Source) Compile(snap *snapshot.Snapshot) (*config.Config, []*templates.Set, error) {
	plurals := map[string]string{}
	if s.Resolve != nil {
		resolve := s.Resolve
		s.Resolve = func(gvk schema.GroupVersionKind) (string, error) {
			p, err := resolve(gvk)
			if err == nil {
				plurals[gvk.String()] = p
			}
			return p, err
		}
	}
	compiles.Add(1)
	cfg, err := config.LoadSnapshot(snap, s.Resolve)
	if err != nil {
		return nil, nil, err
	}
	cfg.WithDefaultIdentity(s.DefaultIdentity)
	sets, err := templates.LoadAll(cfg, s.Options)
	if err != nil {
		return nil, nil, err
	}
	s.attach(cfg, sets, plurals)
	return cfg, sets, nil
}

// Attach gives sets compiled without the cluster (Serve checks a config
// file before it has a client) what Compile would have: the cluster's
// capabilities (Options) and the Wall. Plurals come from no discovery: a
// watches file is compiled with the client, by Compile.
func (s Source) Attach(cfg *config.Config, sets []*templates.Set) {
	for _, set := range sets {
		set.SetCapabilities(s.Options.Capabilities)
	}
	s.attach(cfg, sets, nil)
}

func (s Source) attach(cfg *config.Config, sets []*templates.Set, plurals map[string]string) {
	if s.Wall != nil {
		s.Wall.Attach(renderworker.Hello{Snapshot: cfg.Snapshot(), Plurals: plurals,
			Capabilities: s.Options.Capabilities, AllowedKinds: s.Options.AllowedKinds}, sets)
	}
}

// compiles counts Compile calls in this process (Compiles).
var compiles atomic.Int64

// Compiles is how many times this process compiled a config: one at start
// and one per reload tried (stencil_config_compiles_total).
func Compiles() int64 { return compiles.Load() }

// WorkerLoad is a render worker's renderworker.LoadFunc: it compiles the
// snapshot the controller compiled, with the plurals discovery gave it. It
// reads no file: what the disk holds now does not matter.
func WorkerLoad(h renderworker.Hello) ([]*templates.Set, error) {
	s := Source{Path: h.Snapshot.Path, Watches: h.Snapshot.Watches,
		Options: templates.Options{Capabilities: h.Capabilities, AllowedKinds: h.AllowedKinds}}
	if h.Snapshot.Watches {
		s.Resolve = func(gvk schema.GroupVersionKind) (string, error) {
			if p, ok := h.Plurals[gvk.String()]; ok {
				return p, nil
			}
			return "", fmt.Errorf("the controller resolved no plural for %s", gvk)
		}
	}
	cfg, err := config.LoadSnapshot(h.Snapshot, s.Resolve)
	if err != nil {
		return nil, err
	}
	return templates.LoadAll(cfg, s.Options)
}

// Watcher polls a config file and the templates it names.
type Watcher struct {
	// Source is the config; Path is its file.
	Source Source
	Path   string
	// Interval is the poll period (default 5s).
	Interval time.Duration
	// Apply receives each new valid config.
	Apply Apply
	// Result records each attempt: whether the new config was taken.
	Result func(ok bool, at time.Time)

	// fingerprint is the hash of the files last tried.
	fingerprint string
	// retryAt, when set, is when the files last tried are tried again
	// although unchanged: they were refused for a reason outside them.
	retryAt time.Time
}

// RetryDenied is how often a config refused for a reason outside its files
// (stencil lacks the RBAC it needs) is tried again by the poll: the
// operator applies the new `stencil rbac` output and need not touch the
// config. Not more often: each try asks the API server a few questions and
// logs the refusal.
const RetryDenied = 30 * time.Second

// retryable is an error a later try of the same files may not meet.
type retryable interface{ Retryable() bool }

// New returns a Watcher for the config at path. It takes the fingerprint of
// the files first, so the caller loads the config after it: a change made
// in between is seen by the first poll.
func New(src Source, interval time.Duration, apply Apply, result func(ok bool, at time.Time)) *Watcher {
	return &Watcher{Source: src, Path: src.Path, Interval: interval, Apply: apply, Result: result, fingerprint: src.Fingerprint()}
}

// Load reads and validates the config file at path and parses its
// templates: every check "stencil validate" makes.
func Load(path string) (*config.Config, []*templates.Set, error) { return Source{Path: path}.Load() }

// Fingerprint is Source.Fingerprint of the config file at path.
func Fingerprint(path string) string { return Source{Path: path}.Fingerprint() }

// Fingerprint hashes the content of the config file and of every template
// and chart file it names (symlinks followed). A file that cannot be read
// hashes as its error, so a file that appears or disappears is a change
// too.
func (s Source) Fingerprint() string {
	path := s.Path
	h := sha256.New()
	add := func(name string) {
		data, err := os.ReadFile(name)
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
		if err != nil {
			fmt.Fprintf(h, "error: %v\x00", err)
		}
	}
	// addTree adds a chart: a .tgz, or every file of its directory as
	// Helm reads it (snapshot.ChartFiles); a tree that cannot be walked
	// hashes as its error.
	addTree := func(root string) {
		files, err := snapshot.ChartFiles(root)
		if err != nil {
			fmt.Fprintf(h, "%s\x00error: %v\x00", root, err)
		}
		for _, f := range files {
			add(f)
		}
	}
	add(path)
	if s.Watches {
		for _, c := range config.WatchedCharts(path) {
			addTree(c)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	// The template list comes from the config as it is now on disk, only
	// decoded (no file checks, no chart loads on every poll); a config
	// that does not decode hashes as its own bytes only.
	if cfg, err := config.Decode(path); err == nil {
		for _, f := range cfg.Files() {
			if f.Chart {
				addTree(f.Path)
			} else {
				add(f.Path)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Run polls until ctx ends; SIGHUP forces a reload attempt.
func (w *Watcher) Run(ctx context.Context) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "config", w.Path)
	ctx = klog.NewContext(ctx, logger)
	interval := w.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if w.fingerprint == "" {
		w.fingerprint = w.Source.Fingerprint()
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			logger.Info("SIGHUP: reloading the config")
			w.reload(ctx, true)
		case <-t.C:
			w.reload(ctx, false)
		}
	}
}

// reload loads the config if its files changed (or force), and applies it
// when valid.
func (w *Watcher) reload(ctx context.Context, force bool) {
	logger := klog.FromContext(ctx)
	fp := w.Source.Fingerprint()
	if fp == w.fingerprint && !force && (w.retryAt.IsZero() || time.Now().Before(w.retryAt)) {
		return
	}
	// Whatever the outcome, this content has been tried: an invalid
	// config is reported once, not on every poll.
	w.fingerprint = fp
	w.retryAt = time.Time{}
	cfg, sets, err := w.Source.Load()
	if err == nil {
		err = w.Apply(ctx, cfg, sets)
	}
	if err != nil {
		var r retryable
		if errors.As(err, &r) && r.Retryable() {
			w.retryAt = time.Now().Add(RetryDenied)
			logger.Error(err, "Config reload rejected; the running config keeps serving, and the same config is tried again", "retryIn", RetryDenied)
			w.Result(false, time.Now())
			return
		}
		logger.Error(err, "Config reload rejected; the running config keeps serving")
		w.Result(false, time.Now())
		return
	}
	logger.Info("Config reload applied", "resources", len(cfg.Resources))
	w.Result(true, time.Now())
}
