package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

type strMethod = exec.Method[string]

// methodSets is gonja's methods with Python's meaning where they differ,
// and without the ones the immutable sandbox forbids (list.append,
// dict.update, ...).
func methodSets() exec.Methods {
	str := map[string]strMethod{}
	for _, name := range []string{"capwords", "casefold", "encode", "find",
		"format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "islower",
		"isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "lower", "partition",
		"removeprefix", "removesuffix", "rfind", "rpartition", "splitlines", "swapcase", "upper",
		"zfill", "expandtabs"} {
		if m, ok := builtins.Methods.Str.Get(name); ok {
			str[name] = boundedStrMethod(name, m)
		}
	}
	str["count"] = func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if len(va.Args) != 1 || !va.Args[0].IsString() || len(va.KwArgs) > 0 {
			return nil, errors.New("count() takes one string")
		}
		return strings.Count(self, va.Args[0].String()), nil
	}
	str["center"] = padMethod("center")
	str["ljust"] = padMethod("ljust")
	str["rjust"] = padMethod("rjust")
	str["index"] = indexMethod("index", strings.Index)
	str["rindex"] = indexMethod("rindex", strings.LastIndex)
	str["strip"] = stripMethod("strip", true, true)
	str["lstrip"] = stripMethod("lstrip", true, false)
	str["rstrip"] = stripMethod("rstrip", false, true)
	str["split"] = splitMethod("split", false)
	str["rsplit"] = splitMethod("rsplit", true)
	str["replace"] = strReplace
	str["startswith"] = affixMethod("startswith", strings.HasPrefix)
	str["endswith"] = affixMethod("endswith", strings.HasSuffix)
	str["title"] = func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) { return pyTitle(self), nil }
	str["capitalize"] = func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if self == "" {
			return "", nil
		}
		r := []rune(strings.ToLower(self))
		r[0] = unicode.ToUpper(r[0])
		return string(r), nil
	}

	list := map[string]exec.Method[[]any]{}
	if m, ok := builtins.Methods.List.Get("copy"); ok {
		list["copy"] = m
	}
	for _, name := range []string{"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"} {
		list[name] = func([]any, *exec.Value, *exec.VarArgs) (any, error) { return nil, securityError(name, "list") }
	}

	dict := map[string]exec.Method[map[string]any]{
		"items": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			if len(va.Args) > 0 || len(va.KwArgs) > 0 {
				return nil, errors.New("items() takes no arguments")
			}
			return pairList(dictPairs(self)), nil
		},
		"keys": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			var out []any
			for _, p := range dictPairs(self) {
				out = append(out, p.Key.Interface())
			}
			return out, nil
		},
		"values": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			var out []any
			for _, p := range dictPairs(self) {
				out = append(out, p.Value.Interface())
			}
			return out, nil
		},
		"get": func(_ map[string]any, self *exec.Value, va *exec.VarArgs) (any, error) {
			a, err := args("get", va, "key", "default")
			if err != nil {
				return nil, err
			}
			if a[0] == nil {
				return nil, errors.New("get expected at least 1 argument, got 0")
			}
			for _, p := range dictPairs(self) {
				if p.Key.EqualValueTo(a[0]) {
					return p.Value.Interface(), nil
				}
			}
			if a[1] == nil {
				return nil, nil
			}
			return a[1].Interface(), nil
		},
	}
	if m, ok := builtins.Methods.Dict.Get("copy"); ok {
		dict["copy"] = m
	}
	for _, name := range []string{"pop", "popitem", "setdefault", "update", "clear"} {
		dict[name] = func(map[string]any, *exec.Value, *exec.VarArgs) (any, error) {
			return nil, securityError(name, "dict")
		}
	}
	return exec.Methods{
		Bool:  builtins.Methods.Bool,
		Int:   builtins.Methods.Int,
		Float: builtins.Methods.Float,
		Str:   exec.NewMethodSet(str),
		List:  exec.NewMethodSet(list),
		Dict:  exec.NewMethodSet(dict),
	}
}

func boundedStrMethod(name string, m strMethod) strMethod {
	return func(self string, sv *exec.Value, va *exec.VarArgs) (any, error) {
		if err := checkIntArgs(name, va); err != nil {
			return nil, err
		}
		return m(self, sv, va)
	}
}

// padMethod is str.center / ljust / rjust(width, fillchar=' ').
func padMethod(name string) strMethod {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if err := checkIntArgs(name, va); err != nil {
			return nil, err
		}
		a, err := args(name, va, "width", "fillchar")
		if err != nil {
			return nil, err
		}
		if a[0] == nil || !isInt(a[0]) {
			return nil, fmt.Errorf("%s() needs an integer width", name)
		}
		fill := " "
		if a[1] != nil {
			if !a[1].IsString() || utf8.RuneCountInString(a[1].String()) != 1 {
				return nil, fmt.Errorf("%s(): the fill character must be exactly one character long", name)
			}
			fill = a[1].String()
		}
		n := utf8.RuneCountInString(self)
		pad := intOf(a[0]) - n
		if pad <= 0 {
			return self, nil
		}
		left := 0
		switch name {
		case "rjust":
			left = pad
		case "center":
			left = pad/2 + (pad & intOf(a[0]) & 1)
		}
		return strings.Repeat(fill, left) + self + strings.Repeat(fill, pad-left), nil
	}
}

// indexMethod is str.index / str.rindex(sub): like find, but a missing
// substring is an error. The position counts characters.
func indexMethod(name string, find func(s, sub string) int) strMethod {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		if len(va.Args) != 1 || !va.Args[0].IsString() || len(va.KwArgs) > 0 {
			return nil, fmt.Errorf("%s() takes one string", name)
		}
		i := find(self, va.Args[0].String())
		if i < 0 {
			return nil, errors.New("substring not found")
		}
		return utf8.RuneCountInString(self[:i]), nil
	}
}

// pyIsSpace is str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// optString reads an optional str-or-None argument.
func optString(fn string, v *exec.Value) (string, bool, error) {
	if isNone(v) {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, fmt.Errorf("%s arg must be None or str, not %s", fn, engineTypeName(v))
	}
	return v.String(), true, nil
}

func stripMethod(name string, left, right bool) strMethod {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		a, err := args(name, va, "chars")
		if err != nil {
			return nil, err
		}
		chars, given, err := optString(name, a[0])
		if err != nil {
			return nil, err
		}
		cut := pyIsSpace
		if given {
			cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, cut)
		}
		if right {
			self = strings.TrimRightFunc(self, cut)
		}
		return self, nil
	}
}

// splitMethod is str.split / str.rsplit(sep=None, maxsplit=-1).
func splitMethod(name string, fromRight bool) strMethod {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		a, err := args(name, va, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		sep, given, err := optString(name, a[0])
		if err != nil {
			return nil, err
		}
		maxsplit := -1
		if !isNone(a[1]) {
			n, ok := toInt(a[1])
			if !ok || a[1].IsFloat() {
				return nil, fmt.Errorf("%s: maxsplit must be an integer", name)
			}
			maxsplit = n
		}
		var parts []string
		switch {
		case given && sep == "":
			return nil, errors.New("empty separator")
		case given && maxsplit < 0:
			parts = strings.Split(self, sep)
		case given && !fromRight:
			parts = strings.SplitN(self, sep, maxsplit+1)
		case given:
			parts = rsplitN(self, sep, maxsplit)
		default:
			parts = splitSpace(self, maxsplit, fromRight)
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
}

func rsplitN(s, sep string, n int) []string {
	var rev []string
	for n != 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
		n--
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// splitSpace is str.split() without a separator: runs of whitespace split,
// and no empty strings come back; at most maxsplit splits, the rest of the
// text kept whole (with its far end's whitespace).
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, pyIsSpace)
	}
	var out []string
	if !fromRight {
		for {
			s = strings.TrimLeftFunc(s, pyIsSpace)
			if s == "" {
				return out
			}
			if len(out) == maxsplit {
				return append(out, s)
			}
			i := strings.IndexFunc(s, pyIsSpace)
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i])
			s = s[i:]
		}
	}
	var rev []string
	for {
		s = strings.TrimRightFunc(s, pyIsSpace)
		if s == "" {
			break
		}
		if len(rev) == maxsplit {
			rev = append(rev, s)
			break
		}
		i := strings.LastIndexFunc(s, pyIsSpace)
		if i < 0 {
			rev = append(rev, s)
			break
		}
		_, w := decodeLastRune(s[:i+1])
		rev = append(rev, s[i+w:])
		s = s[:i+w]
	}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

func decodeLastRune(s string) (rune, int) {
	r := []rune(s)
	if len(r) == 0 {
		return 0, 0
	}
	last := r[len(r)-1]
	return last, len(string(last))
}

func strReplace(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
	a, err := args("replace", va, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	if a[0] == nil || a[1] == nil || !a[0].IsString() || !a[1].IsString() {
		return nil, errors.New("replace() takes two strings")
	}
	n := -1
	if !isNone(a[2]) {
		c, ok := toInt(a[2])
		if !ok {
			return nil, errors.New("replace(): count must be an integer")
		}
		n = c
	}
	if a[0].String() == "" && len(self)+1 > MaxIntArg {
		return nil, fmt.Errorf("%w: replace of the empty string in a long text", ErrLimit)
	}
	return strings.Replace(self, a[0].String(), a[1].String(), n), nil
}

// affixMethod is str.startswith / str.endswith(prefix, start=None,
// end=None), where prefix may be a tuple (list) of strings.
func affixMethod(name string, has func(s, affix string) bool) strMethod {
	return func(self string, _ *exec.Value, va *exec.VarArgs) (any, error) {
		a, err := args(name, va, "prefix", "start", "end")
		if err != nil {
			return nil, err
		}
		if a[0] == nil {
			return nil, fmt.Errorf("%s() takes at least 1 argument (0 given)", name)
		}
		r := []rune(self)
		start, end := 0, len(r)
		if !isNone(a[1]) {
			n, _ := toInt(a[1])
			start = clampIndex(n, len(r))
		}
		if !isNone(a[2]) {
			n, _ := toInt(a[2])
			end = clampIndex(n, len(r))
		}
		if start > end {
			return false, nil
		}
		s := string(r[start:end])
		var affixes []string
		switch {
		case a[0].IsString():
			affixes = []string{a[0].String()}
		case a[0].IsList():
			for i := range a[0].Len() {
				e := exec.ToValue(a[0].Index(i))
				if !e.IsString() {
					return nil, fmt.Errorf("tuple for %s must only contain str, not %s", name, engineTypeName(e))
				}
				affixes = append(affixes, e.String())
			}
		default:
			return nil, fmt.Errorf("%s first arg must be str or a tuple of str, not %s", name, engineTypeName(a[0]))
		}
		for _, x := range affixes {
			if has(s, x) {
				return true, nil
			}
		}
		return false, nil
	}
}

func clampIndex(i, n int) int {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}

// pyTitle is str.title: a cased character after an uncased one starts a
// word.
func pyTitle(s string) string {
	var sb strings.Builder
	prevCased := false
	for _, r := range s {
		cased := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		if cased {
			if prevCased {
				r = unicode.ToLower(r)
			} else {
				r = unicode.ToTitle(r)
			}
		}
		prevCased = cased
		sb.WriteRune(r)
	}
	return sb.String()
}
