package chat

import (
	"github.com/nikolalohinski/gonja/v2/exec"
)

// testOverrides are Jinja's type tests with Python's meaning: a string and
// a dict are sequences; bools are numbers but not integers; only True is
// true and only False is false.
func testOverrides() map[string]exec.TestFunction {
	return map[string]exec.TestFunction{
		"sequence": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsString() || in.IsList() || in.IsDict(), nil
		},
		"iterable": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsString() || in.IsList() || in.IsDict(), nil
		},
		"mapping": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsDict(), nil
		},
		"string": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsString(), nil
		},
		"number": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsNumber() || in.IsBool(), nil
		},
		"integer": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsInteger() && !in.IsBool(), nil
		},
		"float": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsFloat(), nil
		},
		"boolean": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool(), nil
		},
		"true": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool() && in.Bool(), nil
		},
		"false": func(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
			return in.IsBool() && !in.Bool(), nil
		},
	}
}
