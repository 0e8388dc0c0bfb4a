package config

import "fmt"

// RenderBudget bounds the work one render of one custom resource (its
// children and its status together) may do. Templates are the platform
// team's but values are the tenant's, and a plausible template can turn a
// tenant's number into unbounded work (range until .Spec.shards). Zero
// fields take the defaults (DefaultRenderBudget), which no realistic
// template comes near; an entry raises them where its templates need more.
type RenderBudget struct {
	// Steps bounds the template steps: range iterations, template and
	// include calls, function calls and printed values, plus what the
	// functions return (one step per list item or map entry, and per 64
	// bytes of text).
	Steps int64 `json:"steps,omitempty"`
	// StringBytes bounds the length of the text any one function returns.
	StringBytes int64 `json:"stringBytes,omitempty"`
	// ListItems bounds the items of a list, or the entries of a map, any one
	// function returns.
	ListItems int64 `json:"listItems,omitempty"`
	// IncludeDepth bounds the nesting of include and template calls, and
	// of tpl in chart mode.
	IncludeDepth int64 `json:"includeDepth,omitempty"`
	// TimeoutSeconds is the wall-clock backstop: a render still running
	// after it stops at its next step, whatever its counts (work no count
	// models cannot hold a worker). The counts decide first: they are the
	// same on every replica, the clock is not.
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
	// MemoryMiB bounds the memory a render worker may map beyond what it
	// holds when it starts (RLIMIT_AS, package renderworker): the wall the
	// kernel enforces, whatever a library's allocation the counts missed.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// ResultNodes bounds the values (every mapping, list and scalar) of
	// one render's result, children and status together. Bytes alone do
	// not bound what a result costs the process that decodes it: 5 MiB
	// of "[{},{},...]" decodes to about 118 MiB of Go maps. The worker
	// refuses a result past it before sending it, and the controller
	// counts again before it decodes.
	ResultNodes int64 `json:"resultNodes,omitempty"`
}

// DefaultRenderBudget is the budget of an entry that sets none, about one
// second of one core of a small machine: a step is about 0.5 µs of
// text/template's work (a loop turn, an action, a call, a list item a
// function reads, 64 bytes it copies), so a loop in a loop counting the
// duplicates of a tenant's 500 hosts renders (2,250,000 steps, about a
// second) and one over 50,000 hosts stops in about 1.5 seconds. stringBytes
// is the output bound, 4 MiB, above etcd's 1.5 MiB: a function may return
// any tenant data as stored, toJson of a whole spec included. The clock
// (timeoutSeconds) is the backstop, well above what the counts allow, so
// that a loaded machine does not fail a render the counts let through.
//
// resultNodes is ten times what the largest chart the project renders
// gives with every feature on (bitnami nginx: see
// TestResultNodesFitRealCharts), and decodes to a few MiB at most.
var DefaultRenderBudget = RenderBudget{Steps: 3_000_000, StringBytes: 4 << 20, ListItems: 100_000, IncludeDepth: 100, TimeoutSeconds: 5, MemoryMiB: 512, ResultNodes: 50_000}

// renderBudgetMax is how far an entry may raise each bound: a budget is a
// safety net, not a way to switch it off.
var renderBudgetMax = RenderBudget{Steps: 500_000_000, StringBytes: 64 << 20, ListItems: 10_000_000, IncludeDepth: 1000, TimeoutSeconds: 60, MemoryMiB: 16384, ResultNodes: 10_000_000}

// WithDefaults returns b with every zero field set to its default.
func (b RenderBudget) WithDefaults() RenderBudget {
	d := DefaultRenderBudget
	if b.Steps > 0 {
		d.Steps = b.Steps
	}
	if b.StringBytes > 0 {
		d.StringBytes = b.StringBytes
	}
	if b.ListItems > 0 {
		d.ListItems = b.ListItems
	}
	if b.IncludeDepth > 0 {
		d.IncludeDepth = b.IncludeDepth
	}
	if b.TimeoutSeconds > 0 {
		d.TimeoutSeconds = b.TimeoutSeconds
	}
	if b.MemoryMiB > 0 {
		d.MemoryMiB = b.MemoryMiB
	}
	if b.ResultNodes > 0 {
		d.ResultNodes = b.ResultNodes
	}
	return d
}

// String describes the budget for logs and errors.
func (b RenderBudget) String() string {
	return fmt.Sprintf("steps %d, stringBytes %d, listItems %d, includeDepth %d, timeoutSeconds %d, memoryMiB %d, resultNodes %d", b.Steps, b.StringBytes, b.ListItems, b.IncludeDepth, b.TimeoutSeconds, b.MemoryMiB, b.ResultNodes)
}
