package engine

// measuredFuncs write out or copy their arguments whole: each argument is
// measured (budget.Meter.Measured) before they run, and the number says
// how many bytes they may write for one of its bytes (html and js up to
// six).
var measuredFuncs = map[string]int64{
	"toYaml": 1, "toJson": 1, "toRawJson": 1, "toPrettyJson": 2, "mustToJson": 1, "mustToRawJson": 1, "mustToPrettyJson": 2,
	"toString": 1, "toStrings": 1, "print": 1, "println": 1, "printf": 1, "cat": 1, "join": 1, "quote": 1, "squote": 1,
	"deepCopy": 1, "mustDeepCopy": 1, "merge": 1, "mustMerge": 1, "mergeOverwrite": 1, "mustMergeOverwrite": 1,
	"sha256sum": 1, "b64enc": 2, "b32enc": 2, "html": 6, "js": 6, "urlquery": 3, "sortAlpha": 1,
	toYAMLStruct: 1, toJSONStruct: 1,
	// Helm's own serialisers, checked in chart mode before Helm runs them.
	"mustToYaml": 1, "toYamlPretty": 2, "toToml": 1, "mustToToml": 1,
}
