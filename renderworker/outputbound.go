package renderworker

import "stencil.dev/stencil/templates/budget"

// OutputBound is the output bound of one render with budget b: the most
// bytes its result may hold at the pipe (resultsPerObject objects of
// renderBudget.stringBytes). stencil render prints a render's children
// within it, so that what the wall let through cannot print larger than
// the wall would have let it be.
func OutputBound(b budget.Limits) int64 { return resultsPerObject * b.StringBytes }

// OutputObjects is how many times renderBudget.stringBytes OutputBound
// is, for messages that name the bound as the config sets it.
const OutputObjects = resultsPerObject
