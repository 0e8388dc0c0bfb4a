package templates

import (
	"errors"

	"helm.sh/helm/v4/pkg/chart/common"

	"stencil.dev/stencil/templates/budget"
	"stencil.dev/stencil/templates/view"
)

// Wall renders a set's resources outside this process: package
// renderworker runs each render in a worker process whose memory and CPU
// the kernel bounds, so that whatever a render does (a library's
// quadratic corner, an allocation of gigabytes, a runtime fatal error)
// kills a worker and never the controller. The budget still runs inside
// the worker: it gives the message; the wall gives the guarantee.
type Wall interface {
	// Render renders parent with s's templates as RenderHere would, in a
	// worker, reading live children through live.
	Render(s *Set, parent *view.Object, live Live) (*Result, error)
}

// ErrRenderKilled is what a render that killed its worker (a bound the
// kernel or the deadline enforces, a panic, a fatal error) wraps: the
// resource reports RenderKilled and is not rendered again until its spec
// or templates change.
var ErrRenderKilled = errors.New("the render worker was killed")

// ErrWallDown is what a render wraps when no worker could be started to
// run it: a transient failure, retried with backoff, never remembered as
// the resource's own.
var ErrWallDown = errors.New("no render worker could be started")

// ErrWorkerLost is what a render wraps when its worker was lost to
// something outside the render and stencil's bounds (the node's OOM
// killer, a person's kill -9), twice in a row: transient, retried with
// backoff, never remembered as the resource's own failure.
var ErrWorkerLost = errors.New("the render worker was lost from outside the render")

// SetWall makes RenderWith render through w; nil renders in this process.
// It is set once, after Load and before the set is shared.
func (s *Set) SetWall(w Wall) { s.wall = w }

// SetCapabilities sets what a chart entry's render sees as
// .Capabilities, as Options.Capabilities would at load: a set compiled
// before the cluster was reached gets them once it is. Own templates do
// not see them. Set it before the set is shared.
func (s *Set) SetCapabilities(c *common.Capabilities) {
	if s.res.Chart != "" {
		s.capabilities = c
	}
}

// Wall is the wall the set renders behind, or nil.
func (s *Set) Wall() Wall { return s.wall }

// Budget returns the render budget of the set's entry, its defaults
// filled in: what bounds each render, and the worker that runs it.
func (s *Set) Budget() budget.Limits { return s.budget }
