// Package renderworker is the wall around every render: a pool of worker
// processes (the same binary, started with STENCIL_RENDER_WORKER=1) that
// render custom resources with a config's templates, each under address
// space and CPU-time limits the kernel enforces (RLIMIT_AS, RLIMIT_CPU)
// and a deadline at which the controller kills it.
//
// The choice a newcomer may question: a process per worker, and a pipe
// protocol, when the budget (package budget) already stops a costly
// render. The budget prices what it knows; a tenant's input finds costs
// inside libraries no price covers (fmt's padding, a YAML decoder's alias
// expansion, a key check that is cubic in the key), and some of them end
// a Go process at once (fatal error: out of memory cannot be recovered).
// Only a boundary the input cannot cross makes "a tenant's value cannot
// hurt anyone" hold for every input: a render that goes wrong kills its
// worker, the resource reports RenderKilled naming the template and the
// bound, a new worker takes its place, and the controller's heap never
// holds what the render built. The budget stays: it gives the precise
// message (template, line, bound) for what it prices.
package renderworker
