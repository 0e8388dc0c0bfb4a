package funcs

import (
	"maps"
	"slices"
	"text/template/parse"
)

// The function policy of both template modes, in one table: what each
// function stencil knows of is (random, reading the clock, serialising,
// parsing, rendering template text, Helm's own, following Go's map
// order), from which each mode derives what it refuses, checks, frames,
// sorts or keeps as structure. A function a mode treats specially is in
// this table, or it is not treated specially anywhere.

// Class is what a function is, for the policy.
type Class uint16

// The classes of a function.
const (
	// Random differs on every call: randomness, fresh keys and
	// certificates, salted hashes.
	Random Class = 1 << iota
	// Clock reads the clock.
	Clock
	// ClockUnlessDated reads the clock when its date argument is not a
	// time or a number.
	ClockUnlessDated
	// LocalTime reads the local time zone: the same input gives another
	// output on a replica elsewhere.
	LocalTime
	// Serialiser writes data as text: structure where it ends a printing
	// action.
	Serialiser
	// WritesYAML is a serialiser whose output is YAML (a placeholder in it
	// stands unquoted).
	WritesYAML
	// WritesJSON is a serialiser whose output is JSON.
	WritesJSON
	// Parser decodes text into data.
	Parser
	// RendersText returns rendered template text (include, tpl).
	RendersText
	// HelmOwn is defined by Helm's engine, over or in place of sprig's.
	HelmOwn
	// MapOrder would return what Go's map iteration order decides, which
	// differs from call to call: both modes bind a sorted one instead
	// (Ordered), so that a render is the same on every pass.
	MapOrder
)

// policy is the table.
var policy = map[string]Class{
	"randInt": Random, "randAlphaNum": Random, "randAlpha": Random, "randAscii": Random, "randNumeric": Random,
	"randBytes": Random, "shuffle": Random, "uuidv4": Random, "bcrypt": Random, "htpasswd": Random, "encryptAES": Random,
	"genPrivateKey": Random, "genCA": Random, "genCAWithKey": Random, "genSelfSignedCert": Random,
	"genSelfSignedCertWithKey": Random, "genSignedCert": Random, "genSignedCertWithKey": Random,

	"now": Clock, "ago": Clock,
	"date": ClockUnlessDated, "dateInZone": ClockUnlessDated, "date_in_zone": ClockUnlessDated, "htmlDate": ClockUnlessDated,
	"htmlDateInZone": ClockUnlessDated, "durationRound": ClockUnlessDated,
	"toDate": LocalTime, "mustToDate": LocalTime, "dateModify": LocalTime, "mustDateModify": LocalTime,
	"must_date_modify": LocalTime, "unixEpoch": LocalTime,

	"toYaml": HelmOwn | Serialiser | WritesYAML, "mustToYaml": HelmOwn | Serialiser | WritesYAML,
	"toYamlPretty": HelmOwn | Serialiser | WritesYAML,
	"toJson":       HelmOwn | Serialiser | WritesJSON, "mustToJson": HelmOwn | Serialiser | WritesJSON,
	"toPrettyJson": Serialiser | WritesJSON, "mustToPrettyJson": Serialiser | WritesJSON,
	"toRawJson": Serialiser | WritesJSON, "mustToRawJson": Serialiser | WritesJSON,
	"toToml": HelmOwn | Serialiser, "mustToToml": HelmOwn | Serialiser,
	"fromYaml": HelmOwn | Parser, "fromYamlArray": HelmOwn | Parser, "fromJson": HelmOwn | Parser,
	"fromJsonArray": HelmOwn | Parser, "fromToml": HelmOwn | Parser,
	"include": HelmOwn | RendersText, "tpl": HelmOwn | RendersText,
	"fail": HelmOwn, "getHostByName": HelmOwn, "required": HelmOwn, "lookup": HelmOwn,

	"keys": MapOrder, "values": MapOrder,
}

// Is reports whether function name is of any of the classes c.
func Is(name string, c Class) bool { return policy[name]&c != 0 }

// Named lists the functions of any of the classes c, sorted.
func Named(c Class) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(policy)) {
		if policy[name]&c != 0 {
			out = append(out, name)
		}
	}
	return out
}

// Ident is the name of the function c calls, "" when c calls none: the
// name the policy is asked about.
func Ident(c *parse.CommandNode) string {
	if len(c.Args) == 0 {
		return ""
	}
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		return id.Ident
	}
	return ""
}
