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
// Each entry also states the function's price in steps where it costs
// more than its arguments' size (budget.ArgCost), so that a function's
// class and price are read in one place. What stays in package budget is
// code, not prices: the guards that check a call's arguments before it
// runs (until, repeat, printf's widths ...), whose names the budget's
// tests hold to this table.

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

// Price is what a call costs beyond its arguments' size: a step per list
// item or map entry and per 64 bytes of text (budget.ArgCost). A step is
// about 0.5 µs of work on a 2-core machine, whatever the function.
type Price struct {
	// Writes says the function writes out or copies its arguments whole:
	// each is measured (budget.Meter.Measured) before it runs, and it may
	// write Writes bytes for one of theirs (html and js up to six).
	Writes int64
	// Weight is how many times a copy's work a serialiser does per node
	// and byte it writes: YAML's (through JSON, then a node tree, and an
	// emitter) about a step per 4 bytes of long text, 16 times a copy.
	Weight int64
	// Indents says a serialiser writes each entry's depth again as
	// indentation: a value nested 5,000 deep around 100,000 strings is
	// 330 KB of JSON and a gigabyte of YAML.
	Indents bool
	// PerByte is a step per so many bytes of its text arguments, where
	// the function's work per byte is far above a copy's (parsers,
	// regular expressions); 0 is the usual 64.
	PerByte int64
	// Fixed is what one call costs whatever its arguments, for the
	// deliberately slow functions (key stretching, key generation):
	// derivePassword is scrypt at about 0.2 s a call, so a default budget
	// affords a few calls, not one per user of a list.
	Fixed int64
}

// entry is what the table says of one function.
type entry struct {
	class Class
	price Price
}

// is is the entry of a function of class c, priced by its arguments.
func is(c Class) entry { return entry{class: c} }

// costs is e with its price.
func (e entry) costs(p Price) entry {
	e.price = p
	return e
}

// policy is the table. Every sprig function (Masterminds/sprig/v3
// TxtFuncMap), every name of Helm's table (helm.sh/helm/v4/pkg/engine
// funcMap, Helm 4.3.1) and every function stencil binds is in it: the
// funcs and chart tests fail naming any that is not.
var policy = map[string]entry{
	"randInt": is(Random), "randAlphaNum": is(Random), "randAlpha": is(Random), "randAscii": is(Random),
	"randNumeric": is(Random), "randBytes": is(Random), "shuffle": is(Random), "uuidv4": is(Random), "encryptAES": is(Random),
	// Key stretching and key generation: what one call takes.
	"bcrypt":                   is(Random).costs(Price{Fixed: 150_000}),
	"htpasswd":                 is(Random).costs(Price{Fixed: 150_000}),
	"genPrivateKey":            is(Random).costs(Price{Fixed: 1_200_000}),
	"genCA":                    is(Random).costs(Price{Fixed: 400_000}),
	"genCAWithKey":             is(Random).costs(Price{Fixed: 400_000}),
	"genSelfSignedCert":        is(Random).costs(Price{Fixed: 400_000}),
	"genSelfSignedCertWithKey": is(Random).costs(Price{Fixed: 400_000}),
	"genSignedCert":            is(Random).costs(Price{Fixed: 400_000}),
	"genSignedCertWithKey":     is(Random).costs(Price{Fixed: 400_000}),

	"now": is(Clock), "ago": is(Clock), "date": is(ClockUnlessDated), "dateInZone": is(ClockUnlessDated),
	"date_in_zone": is(ClockUnlessDated), "htmlDate": is(ClockUnlessDated), "htmlDateInZone": is(ClockUnlessDated),
	"durationRound": is(ClockUnlessDated), "toDate": is(LocalTime), "mustToDate": is(LocalTime),
	"dateModify": is(LocalTime), "mustDateModify": is(LocalTime), "date_modify": is(LocalTime),
	"must_date_modify": is(LocalTime), "unixEpoch": is(LocalTime),

	"include": is(HelmOwn | PerRender | RendersText), "tpl": is(HelmOwn | PerRender | RendersText),
	"required": is(HelmOwn | PerRender), "fail": is(HelmOwn | PerRender),
	"getHostByName": is(HelmOwn | PerRender | Network), "lookup": is(HelmOwn | PerRender | Reads),
	"mustFromJson": is(Parser),
	// Serialisers write their arguments whole, and YAML's work is many
	// times a copy's; parsers work hard per byte.
	"toYaml":           is(HelmOwn | Serialiser | WritesYAML).costs(Price{Writes: 1, Weight: 16, Indents: true}),
	"mustToYaml":       is(HelmOwn | Serialiser | WritesYAML).costs(Price{Writes: 1, Weight: 16, Indents: true}),
	"toYamlPretty":     is(HelmOwn | Serialiser | WritesYAML).costs(Price{Writes: 2, Weight: 16, Indents: true}),
	"toJson":           is(HelmOwn | Serialiser | WritesJSON).costs(Price{Writes: 1}),
	"mustToJson":       is(HelmOwn | Serialiser | WritesJSON).costs(Price{Writes: 1}),
	"toPrettyJson":     is(Serialiser | WritesJSON).costs(Price{Writes: 2, Indents: true}),
	"mustToPrettyJson": is(Serialiser | WritesJSON).costs(Price{Writes: 2, Indents: true}),
	"toRawJson":        is(Serialiser | WritesJSON).costs(Price{Writes: 1}),
	"mustToRawJson":    is(Serialiser | WritesJSON).costs(Price{Writes: 1}),
	"toToml":           is(HelmOwn | Serialiser).costs(Price{Writes: 1, Weight: 8}),
	"mustToToml":       is(HelmOwn | Serialiser).costs(Price{Writes: 1, Weight: 8}),
	"fromYaml":         is(HelmOwn | Parser).costs(Price{PerByte: 2}),
	"fromYamlArray":    is(HelmOwn | Parser).costs(Price{PerByte: 2}),
	"fromJson":         is(HelmOwn | Parser).costs(Price{PerByte: 4}),
	"fromJsonArray":    is(HelmOwn | Parser).costs(Price{PerByte: 4}),
	"fromToml":         is(HelmOwn | Parser).costs(Price{PerByte: 2}),

	// Helm's duration helpers (4.x): numbers and time.Duration of a
	// duration or a count of seconds.
	"mustToDuration": is(HelmOwn | Pure), "durationSeconds": is(HelmOwn | Pure),
	"durationMilliseconds": is(HelmOwn | Pure), "durationMicroseconds": is(HelmOwn | Pure),
	"durationNanoseconds": is(HelmOwn | Pure), "durationMinutes": is(HelmOwn | Pure),
	"durationHours": is(HelmOwn | Pure), "durationDays": is(HelmOwn | Pure), "durationWeeks": is(HelmOwn | Pure),
	"durationRoundTo": is(HelmOwn | Pure), "durationTruncateTo": is(HelmOwn | Pure),

	"keys": is(MapOrder), "values": is(MapOrder),

	"env": is(Environment), "expandenv": is(Environment),

	"get": is(Stencil | Pure), "hasKey": is(Stencil | Pure), "dnsLabel": is(Stencil | Pure),
	"observed": is(Stencil | Reads), "ready": is(Stencil | Reads), "read": is(Stencil | Reads),
	"sha256sum": is(Stencil | Pure).costs(Price{Writes: 1}),

	"and": is(Builtin), "or": is(Builtin), "not": is(Builtin), "len": is(Builtin), "index": is(Builtin),
	"call": is(Builtin), "eq": is(Builtin), "ne": is(Builtin), "lt": is(Builtin), "le": is(Builtin),
	"gt": is(Builtin), "ge": is(Builtin),
	// The builtins that write text, which the budget binds counted copies of.
	"print":    is(Builtin).costs(Price{Writes: 1}),
	"printf":   is(Builtin).costs(Price{Writes: 1}),
	"println":  is(Builtin).costs(Price{Writes: 1}),
	"html":     is(Builtin).costs(Price{Writes: 6}),
	"js":       is(Builtin).costs(Price{Writes: 6}),
	"urlquery": is(Builtin).costs(Price{Writes: 3}),

	// sprig's functions of their arguments alone: strings, lists, maps,
	// numbers, encodings, hashes, paths, semver, reflection.
	"abbrev": is(Pure), "abbrevboth": is(Pure), "add": is(Pure), "add1": is(Pure), "add1f": is(Pure), "addf": is(Pure),
	"adler32sum": is(Pure), "all": is(Pure), "any": is(Pure), "append": is(Pure), "atoi": is(Pure), "b32dec": is(Pure),
	"b64dec": is(Pure), "base": is(Pure), "biggest": is(Pure), "buildCustomCert": is(Pure), "camelcase": is(Pure),
	"ceil": is(Pure), "chunk": is(Pure), "clean": is(Pure), "coalesce": is(Pure), "compact": is(Pure),
	"concat": is(Pure), "contains": is(Pure), "decryptAES": is(Pure), "deepEqual": is(Pure), "default": is(Pure),
	"dict": is(Pure), "dig": is(Pure), "dir": is(Pure), "div": is(Pure), "divf": is(Pure), "duration": is(Pure),
	"empty": is(Pure), "ext": is(Pure), "first": is(Pure), "float64": is(Pure), "floor": is(Pure), "has": is(Pure),
	"hasPrefix": is(Pure), "hasSuffix": is(Pure), "hello": is(Pure), "indent": is(Pure), "initial": is(Pure),
	"initials": is(Pure), "int": is(Pure), "int64": is(Pure), "isAbs": is(Pure), "kebabcase": is(Pure),
	"kindIs": is(Pure), "kindOf": is(Pure), "last": is(Pure), "list": is(Pure), "lower": is(Pure), "max": is(Pure),
	"maxf": is(Pure), "min": is(Pure), "minf": is(Pure), "mod": is(Pure), "mul": is(Pure), "mulf": is(Pure),
	"mustAppend": is(Pure), "mustChunk": is(Pure), "mustCompact": is(Pure), "mustFirst": is(Pure), "mustHas": is(Pure),
	"mustInitial": is(Pure), "mustLast": is(Pure), "mustPrepend": is(Pure), "mustPush": is(Pure), "mustRest": is(Pure),
	"mustReverse": is(Pure), "mustSlice": is(Pure), "mustUniq": is(Pure), "mustWithout": is(Pure), "nindent": is(Pure),
	"nospace": is(Pure), "omit": is(Pure), "osBase": is(Pure), "osClean": is(Pure), "osDir": is(Pure), "osExt": is(Pure),
	"osIsAbs": is(Pure), "pick": is(Pure), "pluck": is(Pure), "plural": is(Pure), "prepend": is(Pure), "push": is(Pure),
	"regexQuoteMeta": is(Pure), "repeat": is(Pure), "replace": is(Pure), "rest": is(Pure), "reverse": is(Pure),
	"round": is(Pure), "seq": is(Pure), "set": is(Pure), "slice": is(Pure), "sha1sum": is(Pure), "sha512sum": is(Pure),
	"snakecase": is(Pure), "split": is(Pure), "splitList": is(Pure), "splitn": is(Pure), "sub": is(Pure),
	"subf": is(Pure), "substr": is(Pure), "swapcase": is(Pure), "ternary": is(Pure), "title": is(Pure),
	"toDecimal": is(Pure), "trim": is(Pure), "trimAll": is(Pure), "trimPrefix": is(Pure), "trimSuffix": is(Pure),
	"trimall": is(Pure), "trunc": is(Pure), "tuple": is(Pure), "typeIs": is(Pure), "typeIsLike": is(Pure),
	"typeOf": is(Pure), "uniq": is(Pure), "unset": is(Pure), "until": is(Pure), "untilStep": is(Pure),
	"untitle": is(Pure), "upper": is(Pure), "urlJoin": is(Pure), "urlParse": is(Pure), "without": is(Pure),
	"wrap": is(Pure), "wrapWith": is(Pure),
	// Those that write out or copy their arguments whole, or work hard
	// per byte (regular expressions, semver's parser), or on purpose
	// (derivePassword is scrypt).
	"b32enc":                     is(Pure).costs(Price{Writes: 2}),
	"b64enc":                     is(Pure).costs(Price{Writes: 2}),
	"cat":                        is(Pure).costs(Price{Writes: 1}),
	"deepCopy":                   is(Pure).costs(Price{Writes: 1}),
	"derivePassword":             is(Pure).costs(Price{Fixed: 500_000}),
	"join":                       is(Pure).costs(Price{Writes: 1}),
	"merge":                      is(Pure).costs(Price{Writes: 1}),
	"mergeOverwrite":             is(Pure).costs(Price{Writes: 1}),
	"mustDeepCopy":               is(Pure).costs(Price{Writes: 1}),
	"mustMerge":                  is(Pure).costs(Price{Writes: 1}),
	"mustMergeOverwrite":         is(Pure).costs(Price{Writes: 1}),
	"mustRegexFind":              is(Pure).costs(Price{PerByte: 8}),
	"mustRegexFindAll":           is(Pure).costs(Price{PerByte: 8}),
	"mustRegexMatch":             is(Pure).costs(Price{PerByte: 8}),
	"mustRegexReplaceAll":        is(Pure).costs(Price{PerByte: 8}),
	"mustRegexReplaceAllLiteral": is(Pure).costs(Price{PerByte: 8}),
	"mustRegexSplit":             is(Pure).costs(Price{PerByte: 8}),
	"quote":                      is(Pure).costs(Price{Writes: 1}),
	"regexFind":                  is(Pure).costs(Price{PerByte: 8}),
	"regexFindAll":               is(Pure).costs(Price{PerByte: 8}),
	"regexMatch":                 is(Pure).costs(Price{PerByte: 8}),
	"regexReplaceAll":            is(Pure).costs(Price{PerByte: 8}),
	"regexReplaceAllLiteral":     is(Pure).costs(Price{PerByte: 8}),
	"regexSplit":                 is(Pure).costs(Price{PerByte: 8}),
	"semver":                     is(Pure).costs(Price{PerByte: 8}),
	"semverCompare":              is(Pure).costs(Price{PerByte: 8}),
	"sortAlpha":                  is(Pure).costs(Price{Writes: 1}),
	"squote":                     is(Pure).costs(Price{Writes: 1}),
	"toString":                   is(Pure).costs(Price{Writes: 1}),
	"toStrings":                  is(Pure).costs(Price{Writes: 1}),
}

// Is reports whether function name is of any of the classes c.
func Is(name string, c Class) bool { return policy[name].class&c != 0 }

// ClassOf returns the class of function name, and whether the table
// classifies it at all: a mode binds a name it does not as NotClassified.
func ClassOf(name string) (Class, bool) {
	e, ok := policy[name]
	return e.class, ok
}

// PriceOf returns the price of function name (the zero Price, its
// arguments' size alone, when the table does not price it).
func PriceOf(name string) Price { return policy[name].price }

// Named lists the functions of any of the classes c, sorted.
func Named(c Class) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(policy)) {
		if policy[name].class&c != 0 {
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
