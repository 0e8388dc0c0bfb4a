package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Rollout bounds how a template change reaches the existing resources of an
// entry: at most MaxInFlight of them move to the new render at once, and
// the rollout halts once MaxFailed of those that moved fail. Without it, a
// reload re-renders every resource at once.
type Rollout struct {
	// MaxInFlight is how many resources may be moving (moved, not yet
	// Ready) at once: a number, or a percentage of the entry's resources
	// ("25%", rounded up). Default 1.
	MaxInFlight *intstr.IntOrString `json:"maxInFlight,omitempty"`
	// MaxFailed is how many moved resources may turn kstatus Failed before
	// the rollout halts: a number or a percentage (rounded up). Default 1.
	MaxFailed *intstr.IntOrString `json:"maxFailed,omitempty"`
}

// Limits returns MaxInFlight and MaxFailed as counts for an entry of total
// resources, each at least 1.
func (r *Rollout) Limits(total int) (maxInFlight, maxFailed int) {
	return rolloutCount(r.MaxInFlight, total), rolloutCount(r.MaxFailed, total)
}

func rolloutCount(v *intstr.IntOrString, total int) int {
	if v == nil {
		return 1
	}
	n := v.IntValue()
	if v.Type == intstr.String {
		pct, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
		n = int(math.Ceil(float64(total) * float64(pct) / 100))
	}
	return max(n, 1)
}

// String describes the limits for logs, e.g. "maxInFlight 3, maxFailed 1".
func (r *Rollout) String() string {
	show := func(v *intstr.IntOrString) string {
		if v == nil {
			return "1"
		}
		return v.String()
	}
	return fmt.Sprintf("maxInFlight %s, maxFailed %s", show(r.MaxInFlight), show(r.MaxFailed))
}
