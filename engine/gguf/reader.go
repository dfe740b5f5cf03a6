package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unicode/utf8"

	"github.com/aprqa/apr/engine/quant"
)

// Limits. Each length read from a file is checked against the bytes left
// and against these before anything is allocated.
const (
	MaxDims        = 4       // GGML_MAX_DIMS
	MaxNameLen     = 63      // GGML_MAX_NAME - 1: the longest tensor name ggml accepts
	MaxArrayDepth  = 8       // nesting of arrays inside arrays
	DefaultAlign   = 32      // GGUF_DEFAULT_ALIGNMENT
	MaxKeyLen      = 1 << 16 // a metadata key longer than this is refused
	headerFixedLen = 4 + 4 + 8 + 8
)

var magic = [4]byte{'G', 'G', 'U', 'F'}

// Sentinel errors. Every error from Parse or Open is a *FormatError that wraps
// one of these (or quant.ErrUnknownType), so tests and callers use errors.Is.
var (
	ErrTruncated   = errors.New("truncated")
	ErrMagic       = errors.New("not a GGUF file (bad magic)")
	ErrVersion     = errors.New("unsupported GGUF version")
	ErrBigEndian   = errors.New("big-endian GGUF is not supported")
	ErrLimit       = errors.New("count or length out of range")
	ErrDuplicate   = errors.New("duplicate name")
	ErrAlignment   = errors.New("bad alignment")
	ErrRange       = errors.New("data range outside the file")
	ErrValueType   = errors.New("unknown metadata value type")
	ErrTensorShape = errors.New("bad tensor shape")
	ErrUTF8        = errors.New("invalid UTF-8")
)

// FormatError says what is wrong with a GGUF file and where.
type FormatError struct {
	File   string // the path or name given to Open or Parse
	Offset int64  // byte offset in the file of the field at fault
	Field  string // what was being read, e.g. `tensor "blk.0.attn_q.weight" dims`
	Err    error  // a sentinel above, or quant.ErrUnknownType, with detail
	Detail string
}

func (e *FormatError) Error() string {
	msg := fmt.Sprintf("gguf: %s: offset %d: %s: %v", e.File, e.Offset, e.Field, e.Err)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *FormatError) Unwrap() error { return e.Err }

// KV is one metadata entry, in file order.
type KV struct {
	Key    string
	Value  Value
	Offset int64 // where the entry starts in the file (0 for entries not read from a file)
}

// TensorInfo describes one tensor. Shape is in ggml order (ne0 first, the
// contiguous dimension).
type TensorInfo struct {
	Name       string
	Type       quant.Type
	Shape      []int64
	Offset     uint64 // relative to the start of the data section
	Size       uint64 // bytes of data, from type and shape
	InfoOffset int64  // where this tensor's info starts in the file
}

// Elems returns the number of values in the tensor.
func (t *TensorInfo) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Metadata and tensor infos are decoded; tensor
// data stays in the underlying bytes (an mmap for Open) until asked for.
type File struct {
	Path       string
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset int64 // file offset of the data section
	Size       int64 // file size in bytes

	data    []byte
	kvIndex map[string]int
	tIndex  map[string]int
	closer  func() error
}

// Get returns the metadata value for key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns the string value of key; ok is false when the key is absent
// or not a string.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns the tensor's bytes: a view into the mapping, not a copy. The
// slice is valid until Close; it must not be written (the mapping is
// read-only and a write faults).
func (f *File) Data(t *TensorInfo) []byte {
	start := uint64(f.DataOffset) + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

// Architecture returns general.architecture, or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Close releases the mapping. Slices returned by Data are invalid after it.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	f.data = nil
	return c()
}

// decoder reads little-endian values from b, with every length checked
// against the bytes left before it is used.
type decoder struct {
	name string
	b    []byte
	off  int64
	// depth of array nesting while decoding a value
	depth int
}

func (d *decoder) fail(off int64, field string, err error, detail string, args ...any) error {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	return &FormatError{File: d.name, Offset: off, Field: field, Err: err, Detail: detail}
}

func (d *decoder) left() int64 { return int64(len(d.b)) - d.off }

func (d *decoder) need(n int64, field string) error {
	if n < 0 || d.left() < n {
		return d.fail(d.off, field, ErrTruncated, "need %d bytes, %d left", n, max(d.left(), 0))
	}
	return nil
}

func (d *decoder) u8(field string) (uint8, error) {
	if err := d.need(1, field); err != nil {
		return 0, err
	}
	v := d.b[d.off]
	d.off++
	return v, nil
}

func (d *decoder) u16(field string) (uint16, error) {
	if err := d.need(2, field); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v, nil
}

func (d *decoder) u32(field string) (uint32, error) {
	if err := d.need(4, field); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v, nil
}

func (d *decoder) u64(field string) (uint64, error) {
	if err := d.need(8, field); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v, nil
}

// count reads a uint64 count of items that each take at least minSize bytes
// and checks it against the bytes left: the one checker every length prefix
// passes before an allocation.
func (d *decoder) count(field string, minSize int) (int, error) {
	at := d.off
	n, err := d.u64(field)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.left())/uint64(minSize) {
		return 0, d.fail(at, field, ErrLimit, "count %d needs at least %d bytes, %d left", n, satMul(n, uint64(minSize)), d.left())
	}
	return int(n), nil
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func (d *decoder) str(field string) (string, error) {
	at := d.off
	n, err := d.count(field+" length", 1)
	if err != nil {
		return "", err
	}
	s := string(d.b[d.off : d.off+int64(n)])
	d.off += int64(n)
	_ = at
	return s, nil
}

// Parse decodes a GGUF file held in b. name is used in errors. The returned
// File refers to b for tensor data; b must not change while it is in use.
func Parse(name string, b []byte) (*File, error) {
	d := &decoder{name: name, b: b}
	f := &File{Path: name, data: b, Size: int64(len(b)), Alignment: DefaultAlign}

	if err := d.need(4, "magic"); err != nil {
		return nil, err
	}
	if [4]byte(b[0:4]) != magic {
		return nil, d.fail(0, "magic", ErrMagic, "got %q, want \"GGUF\"", b[0:4])
	}
	d.off = 4
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, d.fail(4, "version", ErrVersion, "version 1 (GGUF v1 used 32-bit counts; convert the file with a current llama.cpp)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, d.fail(4, "version", ErrBigEndian, "version field reads %d big-endian", bits.ReverseBytes32(version))
	default:
		return nil, d.fail(4, "version", ErrVersion, "version %d (supported: 2, 3)", version)
	}
	f.Version = version

	// Tensor infos take at least 8 (name len) + 4 (dims) + 4 (type) + 8 (offset) bytes.
	nTensors, err := d.count("tensor count", 24)
	if err != nil {
		return nil, err
	}
	// Metadata entries take at least 8 (key len) + 4 (type) + 1 byte.
	nKV, err := d.count("metadata count", 13)
	if err != nil {
		return nil, err
	}

	f.KV = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := range nKV {
		at := d.off
		key, err := d.str(fmt.Sprintf("metadata[%d] key", i))
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(key) {
			return nil, d.fail(at, fmt.Sprintf("metadata[%d] key", i), ErrUTF8, "key %q", key)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, d.fail(at, fmt.Sprintf("metadata key %q", key), ErrDuplicate, "key appears twice")
		}
		field := fmt.Sprintf("metadata %q", key)
		typeAt := d.off
		t, err := d.u32(field + " type")
		if err != nil {
			return nil, err
		}
		v, err := d.value(field, ValueType(t), typeAt)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v, Offset: at})
	}

	if i, ok := f.kvIndex["general.alignment"]; ok {
		v, at := f.KV[i].Value, f.KV[i].Offset
		a, isU32 := v.X.(uint32)
		if !isU32 {
			return nil, d.fail(at, "metadata \"general.alignment\"", ErrAlignment, "type %s, want uint32", v.TypeName())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, d.fail(at, "metadata \"general.alignment\"", ErrAlignment, "%d is not a power of two", a)
		}
		f.Alignment = uint64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tIndex = make(map[string]int, nTensors)
	for i := range nTensors {
		ti, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tIndex[ti.Name]; dup {
			return nil, d.fail(ti.InfoOffset, fmt.Sprintf("tensor %q", ti.Name), ErrDuplicate, "tensor name appears twice")
		}
		f.tIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	// The data section starts at the next multiple of the alignment.
	dataOff := (uint64(d.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	if nTensors > 0 && dataOff > uint64(len(b)) {
		return nil, d.fail(d.off, "data section", ErrTruncated, "data section would start at %d, file has %d bytes", dataOff, len(b))
	}
	f.DataOffset = int64(dataOff)
	dataLen := uint64(0)
	if dataOff <= uint64(len(b)) {
		dataLen = uint64(len(b)) - dataOff
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		field := fmt.Sprintf("tensor %q offset", t.Name)
		offAt := t.InfoOffset // error offsets point at the tensor's info
		if t.Offset%f.Alignment != 0 {
			return nil, d.fail(offAt, field, ErrAlignment, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		end, carry := bits.Add64(t.Offset, t.Size, 0)
		if carry != 0 || end > dataLen {
			return nil, d.fail(offAt, field, ErrRange, "data [%d, +%d) at file offset %d ends past the end of the file (%d bytes)", t.Offset, t.Size, satAdd(dataOff, t.Offset), len(b))
		}
	}
	return f, nil
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

func (d *decoder) tensorInfo(i int) (TensorInfo, error) {
	at := d.off
	field := fmt.Sprintf("tensor[%d] name", i)
	name, err := d.str(field)
	if err != nil {
		return TensorInfo{}, err
	}
	if len(name) > MaxNameLen {
		return TensorInfo{}, d.fail(at, field, ErrLimit, "name is %d bytes (max %d)", len(name), MaxNameLen)
	}
	if !utf8.ValidString(name) {
		return TensorInfo{}, d.fail(at, field, ErrUTF8, "name %q", name)
	}
	t := TensorInfo{Name: name, InfoOffset: at}
	tf := fmt.Sprintf("tensor %q", name)
	dimsAt := d.off
	nd, err := d.u32(tf + " dims")
	if err != nil {
		return TensorInfo{}, err
	}
	if nd > MaxDims {
		return TensorInfo{}, d.fail(dimsAt, tf+" dims", ErrTensorShape, "%d dims (max %d)", nd, MaxDims)
	}
	t.Shape = make([]int64, nd)
	elems := uint64(1)
	for j := range t.Shape {
		neAt := d.off
		ne, err := d.u64(fmt.Sprintf("%s ne[%d]", tf, j))
		if err != nil {
			return TensorInfo{}, err
		}
		if ne > math.MaxInt64 {
			return TensorInfo{}, d.fail(neAt, fmt.Sprintf("%s ne[%d]", tf, j), ErrTensorShape, "dimension %d is negative as int64", ne)
		}
		hi, lo := bits.Mul64(elems, ne)
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, d.fail(neAt, fmt.Sprintf("%s ne[%d]", tf, j), ErrTensorShape, "element count overflows int64")
		}
		elems = lo
		t.Shape[j] = int64(ne)
	}
	typeAt := d.off
	typ, err := d.u32(tf + " type")
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = quant.Type(typ)
	info, err := quant.Lookup(t.Type)
	if err != nil {
		return TensorInfo{}, &FormatError{File: d.name, Offset: typeAt, Field: tf + " type", Err: err}
	}
	if len(t.Shape) > 0 && t.Shape[0]%int64(info.BlockSize) != 0 {
		return TensorInfo{}, d.fail(dimsAt, tf+" ne[0]", ErrTensorShape, "ne[0]=%d is not a multiple of %s's block size %d", t.Shape[0], info.Name, info.BlockSize)
	}
	size, ok := info.RowBytes(int64(elems))
	if !ok {
		return TensorInfo{}, d.fail(dimsAt, tf+" size", ErrTensorShape, "%d elements of %s overflow", elems, info.Name)
	}
	t.Size = uint64(size)
	off, err := d.u64(tf + " offset")
	if err != nil {
		return TensorInfo{}, err
	}
	t.Offset = off
	return t, nil
}

// value decodes one value of type t; at is the offset of its type field.
func (d *decoder) value(field string, t ValueType, at int64) (Value, error) {
	switch t {
	case TypeUint8:
		v, err := d.u8(field)
		return Value{Type: t, X: v}, err
	case TypeInt8:
		v, err := d.u8(field)
		return Value{Type: t, X: int8(v)}, err
	case TypeUint16:
		v, err := d.u16(field)
		return Value{Type: t, X: v}, err
	case TypeInt16:
		v, err := d.u16(field)
		return Value{Type: t, X: int16(v)}, err
	case TypeUint32:
		v, err := d.u32(field)
		return Value{Type: t, X: v}, err
	case TypeInt32:
		v, err := d.u32(field)
		return Value{Type: t, X: int32(v)}, err
	case TypeUint64:
		v, err := d.u64(field)
		return Value{Type: t, X: v}, err
	case TypeInt64:
		v, err := d.u64(field)
		return Value{Type: t, X: int64(v)}, err
	case TypeFloat32:
		v, err := d.u32(field)
		return Value{Type: t, X: math.Float32frombits(v)}, err
	case TypeFloat64:
		v, err := d.u64(field)
		return Value{Type: t, X: math.Float64frombits(v)}, err
	case TypeBool:
		bAt := d.off
		v, err := d.u8(field)
		if err != nil {
			return Value{}, err
		}
		if v > 1 {
			return Value{}, d.fail(bAt, field, ErrLimit, "bool byte is %d (want 0 or 1)", v)
		}
		return Value{Type: t, X: v == 1}, nil
	case TypeString:
		s, err := d.str(field)
		return Value{Type: t, X: s}, err
	case TypeArray:
		return d.array(field)
	}
	return Value{}, d.fail(at, field+" type", ErrValueType, "type id %d", uint32(t))
}

func (d *decoder) array(field string) (Value, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > MaxArrayDepth {
		return Value{}, d.fail(d.off, field, ErrLimit, "arrays nested deeper than %d", MaxArrayDepth)
	}
	elemAt := d.off
	et32, err := d.u32(field + " element type")
	if err != nil {
		return Value{}, err
	}
	et := ValueType(et32)
	if et > TypeFloat64 {
		return Value{}, d.fail(elemAt, field+" element type", ErrValueType, "type id %d", et32)
	}
	n, err := d.count(field+" array count", et.minSize())
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: TypeArray, Elem: et}
	if sz := et.fixedSize(); sz > 0 {
		raw := d.b[d.off : d.off+int64(n*sz)]
		d.off += int64(n * sz)
		v.X = decodeFixed(et, raw, n)
		if et == TypeBool {
			for i, c := range raw {
				if c > 1 {
					return Value{}, d.fail(d.off-int64(n)+int64(i), field, ErrLimit, "bool element %d is %d (want 0 or 1)", i, c)
				}
			}
		}
		return v, nil
	}
	switch et {
	case TypeString:
		// Check every length first, then copy the whole run once and slice
		// the strings out of it: one allocation instead of one per string
		// (a 151,936-token vocabulary is read in a few milliseconds).
		start := d.off
		ends := make([]int64, n)
		label := field + " string length"
		for i := range ends {
			l, err := d.count(label, 1)
			if err != nil {
				return Value{}, err
			}
			d.off += int64(l)
			ends[i] = d.off
		}
		backing := string(d.b[start:d.off])
		ss := make([]string, n)
		pos := int64(0)
		for i, e := range ends {
			from := pos + 8
			to := e - start
			ss[i] = backing[from:to]
			pos = to
		}
		v.X = ss
	case TypeArray:
		vs := make([]Value, n)
		for i := range vs {
			e, err := d.array(fmt.Sprintf("%s[%d]", field, i))
			if err != nil {
				return Value{}, err
			}
			vs[i] = e
		}
		v.X = vs
	}
	return v, nil
}

func decodeFixed(et ValueType, raw []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		out := make([]uint8, n)
		copy(out, raw)
		return out
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(raw[i])
		}
		return out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = raw[i] == 1
		}
		return out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(raw[2*i:])
		}
		return out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(raw[2*i:]))
		}
		return out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(raw[4*i:])
		}
		return out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(raw[4*i:]))
		}
		return out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(raw[8*i:])
		}
		return out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(raw[8*i:]))
		}
		return out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return out
	}
	panic("gguf: decodeFixed: not a fixed-size type")
}
