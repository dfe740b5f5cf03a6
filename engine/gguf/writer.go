package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/aprqa/apr/engine/quant"
	"github.com/aprqa/apr/internal/atomicfile"
)

// Builder assembles a GGUF v3 file: metadata in the order it was set, then
// tensor infos, then the aligned tensor data. The files it writes load in
// llama.cpp.
type Builder struct {
	kv      []KV
	kvIndex map[string]int
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	info TensorInfo
	data []byte
	fill func(w io.Writer) error
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{kvIndex: map[string]int{}, names: map[string]bool{}}
}

// Set sets key to v, replacing an earlier value in place (keeping its order).
func (b *Builder) Set(key string, v Value) {
	if i, ok := b.kvIndex[key]; ok {
		b.kv[i].Value = v
		return
	}
	b.kvIndex[key] = len(b.kv)
	b.kv = append(b.kv, KV{Key: key, Value: v})
}

// Delete removes key if present.
func (b *Builder) Delete(key string) {
	i, ok := b.kvIndex[key]
	if !ok {
		return
	}
	b.kv = append(b.kv[:i], b.kv[i+1:]...)
	delete(b.kvIndex, key)
	for j := i; j < len(b.kv); j++ {
		b.kvIndex[b.kv[j].Key] = j
	}
}

// KV returns the metadata set so far, in order.
func (b *Builder) KV() []KV { return b.kv }

// AddTensor adds a tensor whose bytes are data (len must equal the size that
// typ and shape imply).
func (b *Builder) AddTensor(name string, typ quant.Type, shape []int64, data []byte) error {
	ti, err := b.check(name, typ, shape)
	if err != nil {
		return err
	}
	if uint64(len(data)) != ti.Size {
		return fmt.Errorf("gguf: tensor %q: %d data bytes, %s %v needs %d", name, len(data), typ, shape, ti.Size)
	}
	b.tensors = append(b.tensors, wtensor{info: ti, data: data})
	return nil
}

// AddTensorFunc adds a tensor whose bytes fill writes when the file is
// written, so that a large model need not be held in memory. fill must write
// exactly the tensor's size in bytes. A nil fill is allowed only for a
// Builder that will be used with EncodeHeader.
func (b *Builder) AddTensorFunc(name string, typ quant.Type, shape []int64, fill func(w io.Writer) error) error {
	ti, err := b.check(name, typ, shape)
	if err != nil {
		return err
	}
	b.tensors = append(b.tensors, wtensor{info: ti, fill: fill})
	return nil
}

func (b *Builder) check(name string, typ quant.Type, shape []int64) (TensorInfo, error) {
	if b.names[name] {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if len(name) > MaxNameLen {
		return TensorInfo{}, fmt.Errorf("gguf: tensor name %q is %d bytes (max %d)", name, len(name), MaxNameLen)
	}
	if len(shape) > MaxDims {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q has %d dims (max %d)", name, len(shape), MaxDims)
	}
	info, err := quant.Lookup(typ)
	if err != nil {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/d) {
			return TensorInfo{}, fmt.Errorf("gguf: tensor %q: bad shape %v", name, shape)
		}
		n *= d
	}
	if len(shape) > 0 && shape[0]%int64(info.BlockSize) != 0 {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q: ne[0]=%d is not a multiple of %s's block size %d", name, shape[0], typ, info.BlockSize)
	}
	size, ok := info.RowBytes(n)
	if !ok {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q: size of %s %v overflows", name, typ, shape)
	}
	b.names[name] = true
	return TensorInfo{Name: name, Type: typ, Shape: append([]int64(nil), shape...), Size: uint64(size)}, nil
}

func (b *Builder) alignment() (uint64, error) {
	i, ok := b.kvIndex["general.alignment"]
	if !ok {
		return DefaultAlign, nil
	}
	a, ok := b.kv[i].Value.X.(uint32)
	if !ok || a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: general.alignment must be a uint32 power of two, got %v", b.kv[i].Value.X)
	}
	return uint64(a), nil
}

// Layout says where the parts of an encoded file landed; tests use it to
// corrupt one field at a time.
type Layout struct {
	KV           []int64 // offset of each metadata entry
	TensorInfo   []int64 // offset of each tensor info
	TensorOffset []int64 // offset of each tensor info's data-offset field
	TensorType   []int64 // offset of each tensor info's type field
	HeaderEnd    int64   // end of the last tensor info
	Data         int64   // start of the data section
	Tensor       []int64 // file offset of each tensor's data
	Size         int64
}

// WriteTo writes the file to w.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	align, err := b.alignment()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	lay, err := b.encode(bw, align, false)
	if err != nil {
		return cw.n, err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	_ = lay
	return cw.n, nil
}

// Encode returns the whole file in memory with its layout. For small files.
func (b *Builder) Encode() ([]byte, Layout, error) {
	align, err := b.alignment()
	if err != nil {
		return nil, Layout{}, err
	}
	var buf bytes.Buffer
	lay, err := b.encode(&buf, align, false)
	return buf.Bytes(), lay, err
}

// EncodeHeader returns only the header (metadata, tensor infos and the
// padding up to the data section); the layout's Size is the size the whole
// file would have. Tensor data is neither generated nor written. Writing the
// header and then truncating the file to Layout.Size gives a valid sparse
// file of any size (benchmarks use it to make a 30 GiB model in a second).
func (b *Builder) EncodeHeader() ([]byte, Layout, error) {
	align, err := b.alignment()
	if err != nil {
		return nil, Layout{}, err
	}
	var buf bytes.Buffer
	lay, err := b.encode(&buf, align, true)
	return buf.Bytes(), lay, err
}

// WriteFile writes the file atomically (package atomicfile): to a temporary
// file beside path, then renamed over it. A path that exists and is not a
// regular file (a device, a FIFO, a directory) is refused by name.
func (b *Builder) WriteFile(path string) error {
	err := atomicfile.Write(path, false, func(f *os.File) error {
		_, err := b.WriteTo(f)
		return err
	})
	if err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type enc struct {
	w   io.Writer
	off int64
	err error
	tmp [8]byte
}

func (e *enc) bytes(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.off += int64(n)
	e.err = err
}

func (e *enc) u8(v uint8) { e.tmp[0] = v; e.bytes(e.tmp[:1]) }
func (e *enc) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.tmp[:], v)
	e.bytes(e.tmp[:2])
}
func (e *enc) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.tmp[:], v)
	e.bytes(e.tmp[:4])
}
func (e *enc) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.tmp[:], v)
	e.bytes(e.tmp[:8])
}
func (e *enc) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func (e *enc) pad(align uint64) {
	n := (align - uint64(e.off)%align) % align
	if n > 0 {
		e.bytes(make([]byte, n))
	}
}

func (b *Builder) encode(w io.Writer, align uint64, headerOnly bool) (Layout, error) {
	e := &enc{w: w}
	var lay Layout
	e.bytes(magic[:])
	e.u32(3)
	e.u64(uint64(len(b.tensors)))
	e.u64(uint64(len(b.kv)))
	for _, kv := range b.kv {
		lay.KV = append(lay.KV, e.off)
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		if err := e.value(kv.Value); err != nil {
			return lay, fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	// Offsets of tensor data, each aligned.
	var dataOff uint64
	offs := make([]uint64, len(b.tensors))
	for i, t := range b.tensors {
		offs[i] = dataOff
		dataOff += (t.info.Size + align - 1) / align * align
	}
	for i, t := range b.tensors {
		lay.TensorInfo = append(lay.TensorInfo, e.off)
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Shape)))
		for _, d := range t.info.Shape {
			e.u64(uint64(d))
		}
		lay.TensorType = append(lay.TensorType, e.off)
		e.u32(uint32(t.info.Type))
		lay.TensorOffset = append(lay.TensorOffset, e.off)
		e.u64(offs[i])
	}
	lay.HeaderEnd = e.off
	e.pad(align)
	lay.Data = e.off
	if headerOnly {
		for i := range b.tensors {
			lay.Tensor = append(lay.Tensor, e.off+int64(offs[i]))
		}
		lay.Size = e.off + int64(dataOff)
		if n := len(b.tensors); n > 0 {
			last := b.tensors[n-1].info
			lay.Size = e.off + int64(offs[n-1]+last.Size)
		}
		return lay, e.err
	}
	for i, t := range b.tensors {
		start := e.off
		lay.Tensor = append(lay.Tensor, start)
		if t.fill != nil {
			if e.err == nil {
				cw := &countWriter{w: e.w}
				if err := t.fill(cw); err != nil {
					return lay, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
				}
				e.off += cw.n
				if uint64(cw.n) != t.info.Size {
					return lay, fmt.Errorf("gguf: tensor %q: fill wrote %d bytes, want %d", t.info.Name, cw.n, t.info.Size)
				}
			}
		} else {
			if uint64(len(t.data)) != t.info.Size {
				return lay, fmt.Errorf("gguf: tensor %q has no data (added with a nil fill, which only EncodeHeader accepts)", t.info.Name)
			}
			e.bytes(t.data)
		}
		if i < len(b.tensors)-1 {
			e.pad(align)
		}
	}
	lay.Size = e.off
	return lay, e.err
}

func (e *enc) value(v Value) error {
	switch x := v.X.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float32:
		e.u32(math.Float32bits(x))
	case float64:
		e.u64(math.Float64bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	default:
		if v.Type != TypeArray {
			return fmt.Errorf("value of Go type %T", v.X)
		}
		e.u32(uint32(v.Elem))
		n := v.Len()
		if n < 0 {
			return fmt.Errorf("array of Go type %T", v.X)
		}
		e.u64(uint64(n))
		if xs, ok := v.X.([]Value); ok {
			for _, el := range xs {
				if el.Type != TypeArray {
					return fmt.Errorf("nested array element of type %s", el.TypeName())
				}
				if err := e.value(el); err != nil {
					return err
				}
			}
			return e.err
		}
		for i := range n {
			if err := e.value(v.Index(i)); err != nil {
				return err
			}
		}
	}
	return e.err
}
