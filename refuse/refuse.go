// Package refuse makes a refusal a value: who refused (a component, contract
// or falsifier id) and why. A refusal is not a failure of a check and never a
// pass: the CLI maps it to exit code 3 and receipts record it as refused.
package refuse

import (
	"errors"
	"fmt"
)

// ErrRefused matches every *Error with errors.Is.
var ErrRefused = errors.New("refused")

// Error is a refusal.
type Error struct {
	By     string // who refused: "engine/ref", "contract:llama", "falsifier:parity" …
	Reason string // one line saying why
	Err    error  // the underlying cause, if any
}

// New returns a refusal by by, with a formatted reason.
func New(by, format string, args ...any) *Error {
	return &Error{By: by, Reason: fmt.Sprintf(format, args...)}
}

// Wrap returns a refusal by by whose reason is err's message.
func Wrap(by string, err error) *Error {
	return &Error{By: by, Reason: err.Error(), Err: err}
}

func (e *Error) Error() string { return fmt.Sprintf("refused by %s: %s", e.By, e.Reason) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) true for every refusal.
func (e *Error) Is(target error) bool { return target == ErrRefused }

// As returns the refusal in err's chain, if any.
func As(err error) (*Error, bool) {
	var r *Error
	ok := errors.As(err, &r)
	return r, ok
}
