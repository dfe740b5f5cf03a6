// Package cu is apr's small binding of the CUDA driver API (libcuda.so.1),
// loaded at run time through purego so that apr builds with CGO_ENABLED=0 on
// machines without CUDA. It binds the versioned symbols (cuMemAlloc_v2, …)
// that CUDA 13's cuda.h names, and turns every CUresult into an *Error that
// names the call and the code.
//
// # Conventions
//
// The CUDA context is current per OS thread: every call that needs it must
// run on a goroutine locked to the thread the context was made current on
// (Driver.Do locks, sets the context and runs a function).
package cu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Library is the file the driver is loaded from, unless EnvLibrary names
// another.
const Library = "libcuda.so.1"

// EnvLibrary names a driver library to load instead of libcuda.so.1 (apr's
// tests point it at the host emulator, engine/cuda/kernels/emu.cpp, whose
// device calls itself "apr host emulator").
const EnvLibrary = "APR_LIBCUDA"

// Result is a CUresult.
type Result int32

// Some CUresult codes, named as cuda.h names them (the driver's own
// cuGetErrorName is asked first; this table names the codes when it cannot
// be).
var resultNames = map[Result]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
	35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE", 200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE", 500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION", 716: "CUDA_ERROR_MISALIGNED_ADDRESS", 719: "CUDA_ERROR_LAUNCH_FAILED",
	999: "CUDA_ERROR_UNKNOWN",
}

// Name returns the code's cuda.h name, or "CUresult N" for a code the table
// lacks.
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult %d", int32(r))
}

// ErrOutOfMemory matches an *Error whose code is CUDA_ERROR_OUT_OF_MEMORY.
var ErrOutOfMemory = errors.New("cu: out of device memory")

// Error is a failed driver call.
type Error struct {
	Call string // "cuMemAlloc_v2"
	Code Result
	Name string // the driver's name for Code (or the table's)
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, int32(e.Code))
}

// Is makes errors.Is(err, ErrOutOfMemory) true for out-of-memory results.
func (e *Error) Is(target error) bool { return target == ErrOutOfMemory && e.Code == 2 }

// Ptr is a device address (CUdeviceptr).
type Ptr uint64

// Driver is the loaded driver library with one device's primary context.
type Driver struct {
	lib  uintptr
	syms map[string]uintptr
	ctx  uintptr
	dev  int32

	mu sync.Mutex // serialises Do (launch argument storage is shared)
	// Launch arguments: slots hold the values, ptrs point at the slots;
	// both pinned for the driver's reads during cuLaunchKernel.
	slots  *[maxArgs]uint64
	ptrs   *[maxArgs]unsafe.Pointer
	cfg    *launchConfig // cuLaunchKernelEx's configuration and attribute
	attr   *launchAttr
	pinner runtime.Pinner
}

const maxArgs = 32

// symbols are every entry point apr calls, by their versioned names.
var symbols = []string{
	"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
	"cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxSynchronize",
	"cuMemGetInfo_v2", "cuModuleLoadData", "cuModuleGetFunction", "cuMemAlloc_v2", "cuMemFree_v2",
	"cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2", "cuMemAllocHost_v2", "cuMemFreeHost",
	"cuLaunchKernel", "cuGetErrorName",
	"cuStreamCreate", "cuStreamSynchronize", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
	"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
	"cuOccupancyMaxActiveBlocksPerMultiprocessor",
}

// Unavailable is why the driver could not be used: the library is missing,
// cuInit failed, or there is no device. Its message is the one-line reason.
type Unavailable struct{ Reason string }

func (u *Unavailable) Error() string { return u.Reason }

var (
	loadOnce sync.Once
	loaded   *Driver
	loadErr  error
)

// Load opens libcuda.so.1, runs cuInit and retains device 0's primary
// context, once per process. The error is an *Unavailable naming why not.
func Load() (*Driver, error) {
	loadOnce.Do(func() {
		lib := Library
		if p := os.Getenv(EnvLibrary); p != "" {
			lib = p
		}
		loaded, loadErr = load(lib)
	})
	return loaded, loadErr
}

func load(path string) (*Driver, error) {
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, &Unavailable{Reason: fmt.Sprintf("%s cannot be loaded: %v", path, err)}
	}
	d := &Driver{lib: lib, syms: map[string]uintptr{}}
	for _, s := range symbols {
		a, err := purego.Dlsym(lib, s)
		if err != nil || a == 0 {
			return nil, &Unavailable{Reason: fmt.Sprintf("%s has no symbol %s (driver too old?)", path, s)}
		}
		d.syms[s] = a
	}
	d.slots = new([maxArgs]uint64)
	d.ptrs = new([maxArgs]unsafe.Pointer)
	for i := range d.slots {
		d.ptrs[i] = unsafe.Pointer(&d.slots[i])
	}
	// cuLaunchKernelEx's one attribute, the same for every early launch:
	// programmaticStreamSerializationAllowed = 1.
	d.attr = &launchAttr{id: attrProgrammaticSerialization, value: [64]byte{0: 1}}
	d.cfg = &launchConfig{attrs: d.attr, nattrs: 1}
	d.pinner.Pin(d.slots)
	d.pinner.Pin(d.ptrs)
	d.pinner.Pin(d.cfg)
	d.pinner.Pin(d.attr)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.call("cuInit", 0); err != nil {
		return nil, &Unavailable{Reason: "cuInit failed: " + err.Error()}
	}
	var n int32
	if err := d.call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n))); err != nil {
		return nil, &Unavailable{Reason: err.Error()}
	}
	if n < 1 {
		return nil, &Unavailable{Reason: "the CUDA driver reports no device"}
	}
	if err := d.call("cuDeviceGet", uintptr(unsafe.Pointer(&d.dev)), 0); err != nil {
		return nil, &Unavailable{Reason: err.Error()}
	}
	if err := d.call("cuDevicePrimaryCtxRetain", uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); err != nil {
		return nil, &Unavailable{Reason: err.Error()}
	}
	return d, nil
}

// call runs the named entry point and turns its CUresult into an error.
//
// Callers pass Go pointers as uintptr(unsafe.Pointer(&x)) for the driver to
// read or write (cuMemAlloc's result, cuMemGetInfo's, …). Without the
// directive below, such an x may live on the caller's goroutine stack, and
// the conversion to uintptr hides it from the runtime: when the call grows
// the stack (its prologue, or purego's), the stack is copied elsewhere and
// the driver writes to the old copy. cuMemAlloc then "returns" 0, which
// is how a KV cache came to live at device address 0 and the next kernel
// to store into it faulted with CUDA_ERROR_ILLEGAL_ADDRESS (H200, apr qa's
// serving gate, issue 11). uintptrescapes makes the compiler move every
// such x to the heap and keep it alive until the call returns, as it does
// for purego.SyscallN's own callers.
//
// Entry points outside symbols (the optional ones: events) are looked up
// on first use, and a missing one is an error naming it.
//
//go:uintptrescapes
func (d *Driver) call(name string, args ...uintptr) error {
	fn := d.sym(name)
	if fn == 0 {
		return fmt.Errorf("cuda: the driver has no entry point %s", name)
	}
	r, _, _ := purego.SyscallN(fn, args...)
	return d.check(name, Result(int32(r)))
}

// sym is the named entry point's address, looked up on first use (0 when
// the driver has none).
func (d *Driver) sym(name string) uintptr {
	if a := d.syms[name]; a != 0 {
		return a
	}
	a, err := purego.Dlsym(d.lib, name)
	if err != nil || a == 0 {
		return 0
	}
	d.syms[name] = a
	return a
}

func (d *Driver) check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: r, Name: d.errorName(r)}
}

// errorName asks the driver for r's name, falling back to the table.
func (d *Driver) errorName(r Result) string {
	if d != nil && d.syms["cuGetErrorName"] != 0 {
		var p *byte
		res, _, _ := purego.SyscallN(d.syms["cuGetErrorName"], uintptr(r), uintptr(unsafe.Pointer(&p)))
		if res == 0 && p != nil {
			return goString(p)
		}
	}
	return r.Name()
}

func goString(p *byte) string {
	var b []byte
	for i := 0; i < 256; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// Do runs fn on a locked OS thread with the context current; calls are
// serialised.
func (d *Driver) Do(fn func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.call("cuCtxSetCurrent", d.ctx); err != nil {
		return err
	}
	return fn()
}

// Hold makes the context current on the calling goroutine's OS thread and
// keeps it there, and holds the driver, until release: a caller that makes
// many calls in a row (an Eval's hundreds of launches) pays the thread lock
// and the context switch once instead of per call. Other goroutines' Do
// waits until release. Between Hold and release the calls below may be
// made directly; Do must not be called (it would wait for itself).
func (d *Driver) Hold() (release func(), err error) {
	d.mu.Lock()
	runtime.LockOSThread()
	if err := d.call("cuCtxSetCurrent", d.ctx); err != nil {
		runtime.UnlockOSThread()
		d.mu.Unlock()
		return nil, err
	}
	return func() {
		runtime.UnlockOSThread()
		d.mu.Unlock()
	}, nil
}

// The calls below must run inside Do or Hold.

// Info describes the device.
type Info struct {
	Driver     int    // cuDriverGetVersion: 1000·major + 10·minor
	Name       string // device name
	Major      int    // compute capability
	Minor      int
	SMs        int
	TotalBytes uint64
	FreeBytes  uint64
}

// Info reads the device's description and free memory.
func (d *Driver) Info() (Info, error) {
	var in Info
	var v int32
	if err := d.call("cuDriverGetVersion", uintptr(unsafe.Pointer(&v))); err != nil {
		return in, err
	}
	in.Driver = int(v)
	name := make([]byte, 256)
	if err := d.call("cuDeviceGetName", uintptr(unsafe.Pointer(&name[0])), 256, uintptr(d.dev)); err != nil {
		return in, err
	}
	in.Name = goString(&name[0])
	for _, a := range []struct {
		attr int
		dst  *int
	}{{75, &in.Major}, {76, &in.Minor}, {16, &in.SMs}} {
		var x int32
		if err := d.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&x)), uintptr(a.attr), uintptr(d.dev)); err != nil {
			return in, err
		}
		*a.dst = int(x)
	}
	var free, total uint64
	if err := d.call("cuMemGetInfo_v2", uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))); err != nil {
		return in, err
	}
	in.FreeBytes, in.TotalBytes = free, total
	return in, nil
}

// Alloc allocates n bytes of device memory (at least 1).
func (d *Driver) Alloc(n uint64) (Ptr, error) {
	var p Ptr
	if n == 0 {
		n = 1
	}
	err := d.call("cuMemAlloc_v2", uintptr(unsafe.Pointer(&p)), uintptr(n))
	if err == nil && p == 0 {
		// never a device address; a kernel would fault on it far from here
		return 0, fmt.Errorf("cuda: cuMemAlloc_v2 of %d bytes succeeded with the address 0", n)
	}
	return p, err
}

// Free releases device memory from Alloc.
func (d *Driver) Free(p Ptr) error {
	if p == 0 {
		return nil
	}
	return d.call("cuMemFree_v2", uintptr(p))
}

// HtoD copies src to device address dst.
func (d *Driver) HtoD(dst Ptr, src unsafe.Pointer, n uint64) error {
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyHtoD_v2", uintptr(dst), uintptr(src), uintptr(n))
}

// AllocHost allocates n bytes of page-locked host memory, which the device
// reads by DMA: an asynchronous copy from it (HtoDAsync) returns at once.
func (d *Driver) AllocHost(n uint64) (unsafe.Pointer, error) {
	// The driver writes the address into p: memory outside Go's heap,
	// which the collector leaves alone.
	var p unsafe.Pointer
	if err := d.call("cuMemAllocHost_v2", uintptr(unsafe.Pointer(&p)), uintptr(n)); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("cuda: cuMemAllocHost_v2 of %d bytes succeeded with the address 0", n)
	}
	return p, nil
}

// FreeHost releases memory from AllocHost.
func (d *Driver) FreeHost(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	return d.call("cuMemFreeHost", uintptr(p))
}

// HtoDAsync queues a copy of n bytes at src (memory from AllocHost) to
// device address dst on s, after the work queued on s before it. It
// returns before the copy runs: src must stay unchanged until s has
// passed it.
func (d *Driver) HtoDAsync(dst Ptr, src unsafe.Pointer, n uint64, s Stream) error {
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyHtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// DtoH copies n bytes from device address src to dst; it waits for the
// work queued before it.
func (d *Driver) DtoH(dst unsafe.Pointer, src Ptr, n uint64) error {
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyDtoH_v2", uintptr(dst), uintptr(src), uintptr(n))
}

// Sync waits for every queued operation; a kernel's failure surfaces here.
func (d *Driver) Sync() error { return d.call("cuCtxSynchronize") }

// Module is loaded device code.
type Module uintptr

// Func is a kernel of a module.
type Func uintptr

// LoadModule loads a PTX (NUL-terminated) or cubin image.
func (d *Driver) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 || image[len(image)-1] != 0 {
		image = append(append([]byte(nil), image...), 0)
	}
	var m Module
	err := d.call("cuModuleLoadData", uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	runtime.KeepAlive(image)
	return m, err
}

// Function returns the kernel called name.
func (d *Driver) Function(m Module, name string) (Func, error) {
	cname := append([]byte(name), 0)
	var f Func
	if err := d.call("cuModuleGetFunction", uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		return 0, fmt.Errorf("%w (kernel %s)", err, name)
	}
	return f, nil
}

// Resident is how many blocks of f with threads threads and shared bytes
// of dynamic shared memory a multiprocessor holds at once (its registers
// and static shared memory counted): the blocks of one wave.
func (d *Driver) Resident(f Func, threads int, shared uint32) (int, error) {
	var n int32
	if err := d.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", uintptr(unsafe.Pointer(&n)), uintptr(f),
		uintptr(threads), uintptr(shared)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Dim is a grid or block shape.
type Dim struct{ X, Y, Z uint32 }

// Launch queues f on stream s (0: the default stream) with the given
// arguments, each packed by Pack.
func (d *Driver) Launch(f Func, grid, block Dim, shared uint32, s Stream, args ...any) error {
	if len(args) > maxArgs {
		return fmt.Errorf("cuda: launch with %d arguments (at most %d)", len(args), maxArgs)
	}
	for i, a := range args {
		v, err := Pack(a)
		if err != nil {
			return fmt.Errorf("cuda: launch argument %d: %w", i, err)
		}
		d.slots[i] = v
	}
	return d.launch(f, grid, block, shared, s)
}

// LaunchPacked is Launch with the arguments already packed (Pack).
func (d *Driver) LaunchPacked(f Func, grid, block Dim, shared uint32, s Stream, args []uint64) error {
	if err := d.setArgs(args); err != nil {
		return err
	}
	return d.launch(f, grid, block, shared, s)
}

// setArgs copies packed arguments into the slots the launch points at.
func (d *Driver) setArgs(args []uint64) error {
	if len(args) > maxArgs {
		return fmt.Errorf("cuda: launch with %d arguments (at most %d)", len(args), maxArgs)
	}
	copy(d.slots[:], args)
	return nil
}

// dims is a launch's shape with every extent at least 1.
func (g Dim) dims() [3]uint32 { return [3]uint32{max(g.X, 1), max(g.Y, 1), max(g.Z, 1)} }

func (d *Driver) launch(f Func, grid, block Dim, shared uint32, s Stream) error {
	g, b := grid.dims(), block.dims()
	return d.call("cuLaunchKernel", uintptr(f), uintptr(g[0]), uintptr(g[1]), uintptr(g[2]),
		uintptr(b[0]), uintptr(b[1]), uintptr(b[2]), uintptr(shared), uintptr(s), uintptr(unsafe.Pointer(&d.ptrs[0])), 0)
}

// launchConfig is CUlaunchConfig (cuda.h): the grid, block, shared memory
// and stream of cuLaunchKernelEx, and its attributes.
type launchConfig struct {
	grid, block [3]uint32
	shared      uint32
	_           uint32
	stream      uintptr
	attrs       *launchAttr
	nattrs      uint32
	_           uint32
}

// launchAttr is CUlaunchAttribute: an id and a 64-byte value (a union).
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

// attrProgrammaticSerialization is CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const attrProgrammaticSerialization = 6

// LaunchPackedEarly is LaunchPacked with programmatic dependent launch
// (Hopper and later): f may start before the kernel queued before it on s
// has finished, and must itself wait for that kernel (griddepcontrol.wait,
// apr.cu's pdl) before it touches memory that kernel reads or writes. Its
// blocks become resident during the kernel before, so that the launch's
// latency, and whatever f does before it waits (a product prefetching its
// weights), overlap that kernel's tail.
func (d *Driver) LaunchPackedEarly(f Func, grid, block Dim, shared uint32, s Stream, args []uint64) error {
	if err := d.setArgs(args); err != nil {
		return err
	}
	d.cfg.grid, d.cfg.block, d.cfg.shared, d.cfg.stream = grid.dims(), block.dims(), shared, uintptr(s)
	return d.call("cuLaunchKernelEx", uintptr(unsafe.Pointer(d.cfg)), uintptr(f), uintptr(unsafe.Pointer(&d.ptrs[0])), 0)
}

// HasEntry reports whether the driver exports the named entry point (an
// optional one, such as cuLaunchKernelEx of CUDA 12).
func (d *Driver) HasEntry(name string) bool { return d.sym(name) != 0 }

// Stream is a CUstream.
type Stream uintptr

// NewStream creates a stream that synchronises with the default stream
// (CU_STREAM_DEFAULT): the synchronous copies (HtoD, DtoH) stay ordered
// with the work queued on it, and it can be captured into a graph.
func (d *Driver) NewStream() (Stream, error) {
	var s Stream
	err := d.call("cuStreamCreate", uintptr(unsafe.Pointer(&s)), 0)
	return s, err
}

// StreamSync waits for the work queued on s.
func (d *Driver) StreamSync(s Stream) error { return d.call("cuStreamSynchronize", uintptr(s)) }

// GraphExec is an instantiated CUDA graph (CUgraphExec).
type GraphExec uintptr

// BeginCapture starts recording the work queued on s into a graph instead
// of running it (CU_STREAM_CAPTURE_MODE_RELAXED: the driver is held, no
// other thread calls it meanwhile).
func (d *Driver) BeginCapture(s Stream) error {
	return d.call("cuStreamBeginCapture_v2", uintptr(s), 2)
}

// EndCapture ends the capture that BeginCapture started on s and returns
// the instantiated graph.
func (d *Driver) EndCapture(s Stream) (GraphExec, error) {
	var g uintptr
	if err := d.call("cuStreamEndCapture", uintptr(s), uintptr(unsafe.Pointer(&g))); err != nil {
		return 0, err
	}
	var e GraphExec
	err := d.call("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&e)), g, 0)
	if derr := d.call("cuGraphDestroy", g); err == nil {
		err = derr
	}
	return e, err
}

// GraphLaunch queues the graph's work on s.
func (d *Driver) GraphLaunch(e GraphExec, s Stream) error {
	return d.call("cuGraphLaunch", uintptr(e), uintptr(s))
}

// Event is a CUevent (timing on the device).
type Event uintptr

// NewEvent creates an event that records time.
func (d *Driver) NewEvent() (Event, error) {
	var e Event
	err := d.call("cuEventCreate", uintptr(unsafe.Pointer(&e)), 0)
	return e, err
}

// DestroyEvent releases e.
func (d *Driver) DestroyEvent(e Event) error {
	return d.call("cuEventDestroy_v2", uintptr(e))
}

// Record queues e on s.
func (d *Driver) Record(e Event, s Stream) error {
	return d.call("cuEventRecord", uintptr(e), uintptr(s))
}

// Elapsed waits for b and returns the milliseconds between a and b.
func (d *Driver) Elapsed(a, b Event) (float32, error) {
	if err := d.call("cuEventSynchronize", uintptr(b)); err != nil {
		return 0, err
	}
	var ms float32
	err := d.call("cuEventElapsedTime_v2", uintptr(unsafe.Pointer(&ms)), uintptr(a), uintptr(b))
	return ms, err
}

// GraphExecDestroy releases an instantiated graph.
func (d *Driver) GraphExecDestroy(e GraphExec) error {
	return d.call("cuGraphExecDestroy", uintptr(e))
}

// Pack returns a kernel argument's bytes as the kernel reads them from its
// 8-byte slot (little-endian; 4-byte types in the low half): Ptr, int64 and
// uint64 as 8 bytes; int, int32 and uint32 as 4 (an int outside int32 is an
// error); float32 as its IEEE bits; nil as a null pointer.
func Pack(a any) (uint64, error) {
	switch v := a.(type) {
	case nil:
		return 0, nil
	case Ptr:
		return uint64(v), nil
	case int64:
		return uint64(v), nil
	case uint64:
		return v, nil
	case int:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return 0, fmt.Errorf("int %d does not fit a kernel's int", v)
		}
		return uint64(uint32(int32(v))), nil
	case int32:
		return uint64(uint32(v)), nil
	case uint32:
		return uint64(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	}
	// The type's name, not a itself, goes to the error: a passed to fmt
	// would make every boxed argument of every launch escape to the heap.
	return 0, fmt.Errorf("kernel argument of type %s", reflect.TypeOf(a))
}
