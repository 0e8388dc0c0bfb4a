package controller

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// contains reports whether live holds every field of want with an equal
// value. Fields only live has (defaults, status, other managers' fields) are
// ignored: server-side apply leaves them alone, so they are no reason to
// write. Lists match element by element when their lengths agree, else each
// wanted element must be held by some live element (a merge-keyed list that
// others appended to).
func contains(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok {
				if wv == nil || isEmptyCollection(wv) {
					continue
				}
				return false
			}
			if !contains(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		if len(l) == len(w) {
			for i := range w {
				if !contains(l[i], w[i]) {
					return false
				}
			}
			return true
		}
		for _, wv := range w {
			found := false
			for _, lv := range l {
				if contains(lv, wv) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	case nil:
		return true
	case string:
		switch l := live.(type) {
		case string:
			return l == w || sameQuantity(l, w)
		case int64, float64:
			// An int-or-string field (targetPort) written as a string.
			return false
		}
		return false
	default:
		return numberOrScalarEqual(live, want)
	}
}

// sameQuantity treats "500m" and "0.5" as equal: the API server stores
// resource quantities in canonical form.
func sameQuantity(a, b string) bool {
	qa, err := resource.ParseQuantity(a)
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(b)
	if err != nil {
		return false
	}
	return qa.Cmp(qb) == 0
}

func isEmptyCollection(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// numberOrScalarEqual compares scalars, treating int64 and float64 holding the
// same number as equal (JSON decoding picks one or the other).
func numberOrScalarEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return a == b
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
