package gguf

import (
	"fmt"
	"math"
)

// ValueType is a GGUF metadata value type id.
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// fixedSize returns the encoded size of a scalar of type t, or 0 for strings
// and arrays (whose size depends on their contents).
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of type t can take; it bounds
// array counts before anything is allocated.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.fixedSize()
}

// Value is one metadata value. X holds the Go form:
//
//	scalar types     uint8 int8 uint16 int16 uint32 int32 uint64 int64 float32 float64 bool string
//	array of scalars []uint8 … []float64, []bool, []string (Elem says which)
//	array of arrays  []Value (Elem is TypeArray)
type Value struct {
	Type ValueType
	Elem ValueType // element type when Type is TypeArray
	X    any
}

// V builds a Value from a Go value of one of the forms listed on Value. It
// panics on any other Go type: that is a programmer error.
func V(x any) Value {
	switch x := x.(type) {
	case uint8:
		return Value{Type: TypeUint8, X: x}
	case int8:
		return Value{Type: TypeInt8, X: x}
	case uint16:
		return Value{Type: TypeUint16, X: x}
	case int16:
		return Value{Type: TypeInt16, X: x}
	case uint32:
		return Value{Type: TypeUint32, X: x}
	case int32:
		return Value{Type: TypeInt32, X: x}
	case uint64:
		return Value{Type: TypeUint64, X: x}
	case int64:
		return Value{Type: TypeInt64, X: x}
	case float32:
		return Value{Type: TypeFloat32, X: x}
	case float64:
		return Value{Type: TypeFloat64, X: x}
	case bool:
		return Value{Type: TypeBool, X: x}
	case string:
		return Value{Type: TypeString, X: x}
	case []uint8:
		return Value{Type: TypeArray, Elem: TypeUint8, X: x}
	case []int8:
		return Value{Type: TypeArray, Elem: TypeInt8, X: x}
	case []uint16:
		return Value{Type: TypeArray, Elem: TypeUint16, X: x}
	case []int16:
		return Value{Type: TypeArray, Elem: TypeInt16, X: x}
	case []uint32:
		return Value{Type: TypeArray, Elem: TypeUint32, X: x}
	case []int32:
		return Value{Type: TypeArray, Elem: TypeInt32, X: x}
	case []uint64:
		return Value{Type: TypeArray, Elem: TypeUint64, X: x}
	case []int64:
		return Value{Type: TypeArray, Elem: TypeInt64, X: x}
	case []float32:
		return Value{Type: TypeArray, Elem: TypeFloat32, X: x}
	case []float64:
		return Value{Type: TypeArray, Elem: TypeFloat64, X: x}
	case []bool:
		return Value{Type: TypeArray, Elem: TypeBool, X: x}
	case []string:
		return Value{Type: TypeArray, Elem: TypeString, X: x}
	case []Value:
		return Value{Type: TypeArray, Elem: TypeArray, X: x}
	}
	panic(fmt.Sprintf("gguf: V: unsupported Go type %T", x))
}

// Uint returns an integer value of any width as uint64; ok is false for
// non-integers and negative values.
func (v Value) Uint() (uint64, bool) {
	switch x := v.X.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8, int16, int32, int64:
		i, _ := v.Int()
		if i < 0 {
			return 0, false
		}
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer value of any width as int64; ok is false for
// non-integers and for a uint64 above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	switch x := v.X.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Float returns a float32 or float64 value as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.X.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { b, ok := v.X.(bool); return b, ok }

// Str returns a string value.
func (v Value) Str() (string, bool) { s, ok := v.X.(string); return s, ok }

// Strings returns an array of strings.
func (v Value) Strings() ([]string, bool) { s, ok := v.X.([]string); return s, ok }

// Len returns the number of elements of an array value, or -1 for a scalar.
func (v Value) Len() int {
	if v.Type != TypeArray {
		return -1
	}
	switch x := v.X.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []Value:
		return len(x)
	}
	return -1
}

// Ints returns an array of any integer type as []int64; ok is false for other
// arrays and for a uint64 element above math.MaxInt64.
func (v Value) Ints() ([]int64, bool) {
	if v.Type != TypeArray {
		return nil, false
	}
	n := v.Len()
	out := make([]int64, n)
	for i := range n {
		e, ok := v.Index(i).Int()
		if !ok {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

// Floats returns an array of float32 or float64 as []float64.
func (v Value) Floats() ([]float64, bool) {
	switch x := v.X.(type) {
	case []float32:
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return out, true
	case []float64:
		return append([]float64(nil), x...), true
	}
	return nil, false
}

// Index returns element i of an array value as a Value. It panics when v is
// not an array or i is out of range, as a slice index would.
func (v Value) Index(i int) Value {
	switch x := v.X.(type) {
	case []uint8:
		return V(x[i])
	case []int8:
		return V(x[i])
	case []uint16:
		return V(x[i])
	case []int16:
		return V(x[i])
	case []uint32:
		return V(x[i])
	case []int32:
		return V(x[i])
	case []uint64:
		return V(x[i])
	case []int64:
		return V(x[i])
	case []float32:
		return V(x[i])
	case []float64:
		return V(x[i])
	case []bool:
		return V(x[i])
	case []string:
		return V(x[i])
	case []Value:
		return x[i]
	}
	panic("gguf: Index of a non-array value")
}

// Native returns v as plain Go data suitable for encoding/json: scalars as
// themselves, arrays as slices, nested arrays as []any. Non-finite floats
// become strings ("NaN", "+Inf", "-Inf") because JSON has no such numbers.
func (v Value) Native() any {
	switch x := v.X.(type) {
	case float32:
		return jsonFloat(float64(x))
	case float64:
		return jsonFloat(x)
	case []float32:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = jsonFloat(float64(f))
		}
		return out
	case []float64:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = jsonFloat(f)
		}
		return out
	case []uint8:
		// encoding/json would write []byte as base64; keep numbers.
		out := make([]uint16, len(x))
		for i, b := range x {
			out[i] = uint16(b)
		}
		return out
	case []Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e.Native()
		}
		return out
	}
	return v.X
}

func jsonFloat(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

// TypeName describes v's type, e.g. "uint32" or "array[string]".
func (v Value) TypeName() string {
	if v.Type == TypeArray {
		if v.Elem == TypeArray {
			if xs, ok := v.X.([]Value); ok && len(xs) > 0 {
				return "array[" + xs[0].TypeName() + "]"
			}
		}
		return "array[" + v.Elem.String() + "]"
	}
	return v.Type.String()
}
