package funcs

import (
	"fmt"
	"maps"
	"slices"
	"text/template"
	"text/template/parse"
)

// The function policy of both template modes, in one table: every
// function a template can call in either mode (sprig's, Helm's own,
// text/template's builtins and stencil's) with what it is (pure, random,
// reading the clock, serialising, parsing, rendering template text, Helm's
// own, reading, following Go's map order), from which each mode derives
// what it refuses, checks, frames, sorts or keeps as structure. A function
// a mode treats specially is in this table, or it is not treated specially
// anywhere; a function that is not in it is refused in both modes
// (NotClassified), never bound as it comes, so that the next sprig or
// Helm release cannot add a function that runs unchecked.
//
// Names that start with "__" are the rewrites' own (engine and chart),
// which the rewritten templates call: machinery, not a template author's
// vocabulary (chart mode's tpl refuses text that names them), and not in
// this table.
//
// Prices are not in this table yet. A function's price in steps is its
// arguments' size (budget.ArgCost) unless one of five tables says more:
// budget's guards (code that checks a call before it runs), perByte,
// fixedCost, serialiserWeight, and engine's measuredFuncs. Folding the
// numbers in here would leave the guards, which are code over a
// budget.Meter, and the rewrites' own names behind: it is issue 64's
// item 4. Until then the budget's and the engine's tests hold every
// priced name to this table, so that a misspelt or removed name fails a
// test instead of going unpriced.

// Class is what a function is, for the policy.
type Class uint32

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
	// Chart mode binds Helm's function itself where it is also a
	// Serialiser or a Parser (framed: the chart rewrite charges and
	// places around each call), counted and tainted where it is Pure,
	// and a copy of its own where it is PerRender.
	HelmOwn
	// MapOrder would return what Go's map iteration order decides, which
	// differs from call to call: both modes bind a sorted one instead
	// (Ordered), so that a render is the same on every pass.
	MapOrder
	// Pure has nothing else to say of it: its result is a function of its
	// arguments alone, and both modes bind it counted against the budget
	// and tainted by what it is given.
	Pure
	// PerRender is bound by Helm afresh for each render (Engine's
	// initFunMap: include, tpl, required, fail, lookup, getHostByName):
	// each mode binds its own or refuses it; Helm's table holds a
	// placeholder.
	PerRender
	// Environment reads the process's environment, which is the
	// controller's: refused in both modes (Helm's table drops them too).
	Environment
	// Network asks the network (DNS): never bound to do so; chart mode
	// answers as Helm does without --enable-dns.
	Network
	// Reads reads objects of the cluster: own templates read the live
	// children and the declared reads (observed, ready, read) and refuse
	// lookup; chart mode answers lookup from the declared reads.
	Reads
	// Builtin is text/template's own; the budget binds counted copies of
	// those that write text (print, printf, println, html, js, urlquery).
	// (sprig's slice takes the builtin's place in both modes: Pure.)
	Builtin
	// Stencil is defined by stencil for its own templates, in place of
	// sprig's or of its own (chart mode binds sprig's where it has one).
	Stencil
)

// policy is the table. Every sprig function (Masterminds/sprig/v3
// TxtFuncMap), every name of Helm's table (helm.sh/helm/v4/pkg/engine
// funcMap, Helm 4.3.1) and every function stencil binds is in it: the
// funcs and chart tests fail naming any that is not.
var policy = map[string]Class{
	"randInt": Random, "randAlphaNum": Random, "randAlpha": Random, "randAscii": Random, "randNumeric": Random,
	"randBytes": Random, "shuffle": Random, "uuidv4": Random, "bcrypt": Random, "htpasswd": Random, "encryptAES": Random,
	"genPrivateKey": Random, "genCA": Random, "genCAWithKey": Random, "genSelfSignedCert": Random,
	"genSelfSignedCertWithKey": Random, "genSignedCert": Random, "genSignedCertWithKey": Random,

	"now": Clock, "ago": Clock,
	"date": ClockUnlessDated, "dateInZone": ClockUnlessDated, "date_in_zone": ClockUnlessDated, "htmlDate": ClockUnlessDated,
	"htmlDateInZone": ClockUnlessDated, "durationRound": ClockUnlessDated,
	"toDate": LocalTime, "mustToDate": LocalTime, "dateModify": LocalTime, "mustDateModify": LocalTime,
	"date_modify": LocalTime, "must_date_modify": LocalTime, "unixEpoch": LocalTime,

	"toYaml": HelmOwn | Serialiser | WritesYAML, "mustToYaml": HelmOwn | Serialiser | WritesYAML,
	"toYamlPretty": HelmOwn | Serialiser | WritesYAML,
	"toJson":       HelmOwn | Serialiser | WritesJSON, "mustToJson": HelmOwn | Serialiser | WritesJSON,
	"toPrettyJson": Serialiser | WritesJSON, "mustToPrettyJson": Serialiser | WritesJSON,
	"toRawJson": Serialiser | WritesJSON, "mustToRawJson": Serialiser | WritesJSON,
	"toToml": HelmOwn | Serialiser, "mustToToml": HelmOwn | Serialiser,
	"fromYaml": HelmOwn | Parser, "fromYamlArray": HelmOwn | Parser, "fromJson": HelmOwn | Parser,
	"fromJsonArray": HelmOwn | Parser, "fromToml": HelmOwn | Parser, "mustFromJson": Parser,
	"include": HelmOwn | PerRender | RendersText, "tpl": HelmOwn | PerRender | RendersText,
	"required": HelmOwn | PerRender, "fail": HelmOwn | PerRender,
	"getHostByName": HelmOwn | PerRender | Network, "lookup": HelmOwn | PerRender | Reads,

	// Helm's duration helpers (4.x): numbers and time.Duration of a
	// duration or a count of seconds.
	"mustToDuration": HelmOwn | Pure, "durationSeconds": HelmOwn | Pure, "durationMilliseconds": HelmOwn | Pure,
	"durationMicroseconds": HelmOwn | Pure, "durationNanoseconds": HelmOwn | Pure, "durationMinutes": HelmOwn | Pure,
	"durationHours": HelmOwn | Pure, "durationDays": HelmOwn | Pure, "durationWeeks": HelmOwn | Pure,
	"durationRoundTo": HelmOwn | Pure, "durationTruncateTo": HelmOwn | Pure,

	"keys": MapOrder, "values": MapOrder,

	"env": Environment, "expandenv": Environment,

	"get": Stencil | Pure, "hasKey": Stencil | Pure, "dnsLabel": Stencil | Pure, "sha256sum": Stencil | Pure,
	"observed": Stencil | Reads, "ready": Stencil | Reads, "read": Stencil | Reads,

	"and": Builtin, "or": Builtin, "not": Builtin, "len": Builtin, "index": Builtin, "call": Builtin,
	"eq": Builtin, "ne": Builtin, "lt": Builtin, "le": Builtin, "gt": Builtin, "ge": Builtin,
	"print": Builtin, "printf": Builtin, "println": Builtin, "html": Builtin, "js": Builtin, "urlquery": Builtin,

	// sprig's functions of their arguments alone: strings, lists, maps,
	// numbers, encodings, hashes, paths, semver, reflection.
	"abbrev": Pure, "abbrevboth": Pure, "add": Pure, "add1": Pure, "add1f": Pure, "addf": Pure, "adler32sum": Pure,
	"all": Pure, "any": Pure, "append": Pure, "atoi": Pure, "b32dec": Pure, "b32enc": Pure, "b64dec": Pure,
	"b64enc": Pure, "base": Pure, "biggest": Pure, "buildCustomCert": Pure, "camelcase": Pure, "cat": Pure,
	"ceil": Pure, "chunk": Pure, "clean": Pure, "coalesce": Pure, "compact": Pure, "concat": Pure, "contains": Pure,
	"decryptAES": Pure, "deepCopy": Pure, "deepEqual": Pure, "default": Pure, "derivePassword": Pure, "dict": Pure,
	"dig": Pure, "dir": Pure, "div": Pure, "divf": Pure, "duration": Pure, "empty": Pure, "ext": Pure,
	"first": Pure, "float64": Pure, "floor": Pure, "has": Pure, "hasPrefix": Pure, "hasSuffix": Pure,
	"hello": Pure, "indent": Pure, "initial": Pure, "initials": Pure, "int": Pure, "int64": Pure, "isAbs": Pure,
	"join": Pure, "kebabcase": Pure, "kindIs": Pure, "kindOf": Pure, "last": Pure, "list": Pure, "lower": Pure,
	"max": Pure, "maxf": Pure, "merge": Pure, "mergeOverwrite": Pure, "min": Pure, "minf": Pure, "mod": Pure,
	"mul": Pure, "mulf": Pure, "mustAppend": Pure, "mustChunk": Pure, "mustCompact": Pure, "mustDeepCopy": Pure,
	"mustFirst": Pure, "mustHas": Pure, "mustInitial": Pure, "mustLast": Pure, "mustMerge": Pure,
	"mustMergeOverwrite": Pure, "mustPrepend": Pure, "mustPush": Pure, "mustRegexFind": Pure,
	"mustRegexFindAll": Pure, "mustRegexMatch": Pure, "mustRegexReplaceAll": Pure,
	"mustRegexReplaceAllLiteral": Pure, "mustRegexSplit": Pure, "mustRest": Pure, "mustReverse": Pure,
	"mustSlice": Pure, "mustUniq": Pure, "mustWithout": Pure, "nindent": Pure, "nospace": Pure, "omit": Pure,
	"osBase": Pure, "osClean": Pure, "osDir": Pure, "osExt": Pure, "osIsAbs": Pure, "pick": Pure, "pluck": Pure,
	"plural": Pure, "prepend": Pure, "push": Pure, "quote": Pure, "regexFind": Pure, "regexFindAll": Pure,
	"regexMatch": Pure, "regexQuoteMeta": Pure, "regexReplaceAll": Pure, "regexReplaceAllLiteral": Pure,
	"regexSplit": Pure, "repeat": Pure, "replace": Pure, "rest": Pure, "reverse": Pure, "round": Pure,
	"semver": Pure, "semverCompare": Pure, "seq": Pure, "set": Pure, "slice": Pure, "sha1sum": Pure, "sha512sum": Pure,
	"snakecase": Pure, "sortAlpha": Pure, "split": Pure, "splitList": Pure, "splitn": Pure, "squote": Pure,
	"sub": Pure, "subf": Pure, "substr": Pure, "swapcase": Pure, "ternary": Pure, "title": Pure,
	"toDecimal": Pure, "toString": Pure, "toStrings": Pure, "trim": Pure, "trimAll": Pure, "trimPrefix": Pure,
	"trimSuffix": Pure, "trimall": Pure, "trunc": Pure, "tuple": Pure, "typeIs": Pure, "typeIsLike": Pure,
	"typeOf": Pure, "uniq": Pure, "unset": Pure, "until": Pure, "untilStep": Pure, "untitle": Pure, "upper": Pure,
	"urlJoin": Pure, "urlParse": Pure, "without": Pure, "wrap": Pure, "wrapWith": Pure,
}

// Is reports whether function name is of any of the classes c.
func Is(name string, c Class) bool { return policy[name]&c != 0 }

// ClassOf returns the class of function name, and whether the table
// classifies it at all: a mode binds a name it does not as NotClassified.
func ClassOf(name string) (Class, bool) {
	c, ok := policy[name]
	return c, ok
}

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

// Unclassified lists the names of m that the table does not classify,
// sorted: the check the tests run over sprig's, Helm's and stencil's
// tables, a function over a map so that a test can add a name to one.
func Unclassified(m template.FuncMap) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if _, ok := policy[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// UnclassifiedError is the error of a call of a function the table does
// not classify: a name a new sprig or Helm added, which no rule of either
// mode has been written for.
type UnclassifiedError struct {
	// Func is the function.
	Func string
}

// Error implements error.
func (e *UnclassifiedError) Error() string {
	return fmt.Sprintf("%s is refused: it is not classified in stencil's function policy (templates/funcs/policy.go), "+
		"so no mode knows whether its result is safe to place, repeatable and bounded", e.Func)
}

// NotClassified is what a mode binds in place of function name, which
// the table does not classify: a template that names it still parses
// (as it would in Helm), and a call fails naming it, instead of running
// a function no rule was written for.
func NotClassified(name string) func(...any) (any, error) {
	return func(...any) (any, error) { return nil, &UnclassifiedError{Func: name} }
}

// refuseUnclassified binds NotClassified in m, and returns it, in place of
// every function of m the table does not classify.
func refuseUnclassified(m template.FuncMap) template.FuncMap {
	for _, name := range Unclassified(m) {
		m[name] = NotClassified(name)
	}
	return m
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
