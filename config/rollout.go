package config

import (
	"encoding/json"
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

var rolloutFields = []string{"maxInFlight", "maxFailed"}

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

// decodeRollout reads an entry's rollout mapping, reporting every bad field.
func (d *decoder) decodeRollout(i int, entry string, v any) *Rollout {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.addf(entry, "rollout", "must be a mapping with maxInFlight and maxFailed, not %s", jsonType(v))
		d.markBad(i, "rollout")
		return nil
	}
	r := &Rollout{}
	if !d.unknownFields(entry, "rollout.", m, rolloutFields) {
		d.markBad(i, "rollout")
	}
	field := func(name string) *intstr.IntOrString {
		raw, ok := m[name]
		if !ok || raw == nil {
			return nil
		}
		path := "rollout." + name
		switch x := raw.(type) {
		case json.Number:
			n, err := x.Int64()
			if err != nil || n < 1 || n > math.MaxInt32 {
				d.addf(entry, path, "%s: must be a whole number of at least 1, or a percentage such as \"25%%\"", x)
				d.markBad(i, "rollout")
				return nil
			}
			v := intstr.FromInt32(int32(n))
			return &v
		case string:
			pct, err := strconv.Atoi(strings.TrimSuffix(x, "%"))
			if !strings.HasSuffix(x, "%") || err != nil || pct < 1 || pct > 100 {
				d.addf(entry, path, "%q: must be a percentage from 1%% to 100%%, or a whole number of at least 1", x)
				d.markBad(i, "rollout")
				return nil
			}
			v := intstr.FromString(x)
			return &v
		}
		d.addf(entry, path, "must be a number or a percentage, not %s", jsonType(raw))
		d.markBad(i, "rollout")
		return nil
	}
	r.MaxInFlight = field("maxInFlight")
	r.MaxFailed = field("maxFailed")
	return r
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
