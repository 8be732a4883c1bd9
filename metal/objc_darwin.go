//go:build darwin

// This file is the Objective-C half of package metal: it loads the frameworks,
// registers every selector once, and turns objc_msgSend into typed Go functions.
//
// ABI decisions (Apple arm64 and x86-64; every one is mirrored in purego's
// func.go / struct_arm64.go / struct_amd64.go, which do the marshalling):
//
//   - objc_msgSend is cast to one concrete Go func type per method shape and
//     registered once with purego.RegisterFunc (see the msg* block below).
//     objc.Send would re-register a trampoline on every call (~1.1 µs).
//     RegisterFunc's calls go through reflection (3–7 allocations each), so
//     the encoder's hot selectors skip it: they call purego.SyscallN on
//     objc_msgSend with integer arguments only, from an argument array the
//     encoder owns (a variadic slice made at the call would escape: one
//     allocation per call), and no allocation per call (hot_darwin_*.go).
//   - NSUInteger/NSInteger are 64-bit on both architectures: Go uint/int.
//     BOOL is bool on arm64 and signed char on x86-64; purego passes a Go bool
//     as 0/1 in an integer register and reads only the low byte of a BOOL
//     return, which is right for both.
//   - CFTimeInterval (GPUStartTime, GPUEndTime) is a double returned in d0
//     (arm64) or xmm0 (x86-64) by plain objc_msgSend: objc_msgSend_fpret is
//     only for long double on x86-64, and there is none on arm64.
//   - MTLSize is three NSUIntegers: 24 bytes, not a homogeneous float
//     aggregate. AAPCS64 (rule B.4, which Apple's arm64 ABI keeps) passes a
//     composite larger than 16 bytes as a pointer to a caller-made copy, in the
//     next integer register; System V x86-64 passes it in memory on the stack
//     (class MEMORY). purego does both when the Go func
//     type takes the struct by value (placeStack in struct_arm64.go and
//     struct_amd64.go; purego's IdentityThreeInt64 test covers this shape),
//     so dispatchThreadgroups:threadsPerThreadgroup: takes two mtlSize values
//     through RegisterFunc on amd64; on arm64 the hot stub passes the two
//     pointers itself, to copies the encoder owns (hot_darwin_arm64.go).
//     No Metal method we call returns a struct, so objc_msgSend_stret (x86-64)
//     is never needed.
//   - NSError** out-parameters are a *objc.ID into Go memory. Metal stores a
//     plain pointer-sized integer there (never a Go pointer), and the goroutine
//     stack cannot move while it is inside the call.
//   - setBytes:length:atIndex: and initWithBytes:length:encoding: copy their
//     input before returning, so passing Go memory for the duration of the call
//     follows the cgo pointer rules that purego documents.
//
// Ownership (Cocoa rules, checked against each method's documentation):
//   - Results of new*, alloc/init*, copy*, MTLCreateSystemDefaultDevice and
//     MTLCopyAllDevices are owned (+1) and released exactly once by a Release
//     method or before the function that made them returns.
//   - Everything else (commandBufferWithUnretainedReferences,
//     computeCommandEncoderWithDispatchType:, error, localizedDescription,
//     name, ...) is borrowed and may be autoreleased. Such calls run inside
//     withPool, and an object we keep past the pool is retained first and
//     released by us later (as ggml-metal does with its command buffers).
//   - Autorelease pools are per OS thread and strictly nested, and goroutines
//     migrate between threads, so a pool is pushed and popped on one locked
//     thread: withPool locks the OS thread, pushes, runs, pops and unlocks;
//     a command buffer's pool (metal_darwin.go, spans) keeps its goroutine
//     locked from CommandBuffer to Commit, so that the hot encoder calls run
//     inside one pool without a push and pop each.

package metal

import (
	"errors"
	"fmt"
	"runtime"
	"structs"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// Framework paths. CoreGraphics must be loaded for MTLCreateSystemDefaultDevice
// to return a device in a process that is not an app (Apple's documentation of
// MTLCreateSystemDefaultDevice; tinygrad's ops_metal.py loads it for the same reason).
const (
	libobjcPath        = "/usr/lib/libobjc.A.dylib"
	foundationPath     = "/System/Library/Frameworks/Foundation.framework/Foundation"
	coreGraphicsPath   = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
	metalFrameworkPath = "/System/Library/Frameworks/Metal.framework/Metal"
)

// Constants from the Metal and Foundation headers (values cross-checked with
// metal-cpp and several independent bindings).
const (
	nsUTF8StringEncoding = 4 // NSUTF8StringEncoding

	mtlResourceStorageModeShared = 0 << 4 // MTLStorageModeShared << MTLResourceStorageModeShift
	mtlDispatchTypeConcurrent    = 1      // MTLDispatchTypeConcurrent
	mtlBarrierScopeBuffers       = 1 << 0 // MTLBarrierScopeBuffers
	mtlMathModeRelaxed           = 1      // MTLMathModeRelaxed (macOS 15+): fast math that honours Inf/NaN

	mtlCommandBufferStatusCompleted = 4
	mtlCommandBufferStatusError     = 5

	mtlCommandBufferErrorOptionEncoderExecutionStatus = 1 << 0 // MTLCommandBufferErrorOptionEncoderExecutionStatus

	mtlLanguageVersion3_0 = 3<<16 + 0 // macOS 13
	mtlLanguageVersion3_1 = 3<<16 + 1 // macOS 14
	mtlLanguageVersion3_2 = 3<<16 + 2 // macOS 15
)

// mtlSize mirrors MTLSize {NSUInteger width, height, depth}: 24 bytes.
type mtlSize struct {
	_      structs.HostLayout
	Width  uint
	Height uint
	Depth  uint
}

// NSObject and Foundation selectors (NSString, NSError, NSArray).
var (
	selAlloc                  = objc.RegisterName("alloc")
	selInit                   = objc.RegisterName("init")
	selRetain                 = objc.RegisterName("retain")
	selRelease                = objc.RegisterName("release")
	selRespondsToSelector     = objc.RegisterName("respondsToSelector:")
	selInitWithBytesLengthEnc = objc.RegisterName("initWithBytes:length:encoding:")
	selUTF8String             = objc.RegisterName("UTF8String")
	selLocalizedDescription   = objc.RegisterName("localizedDescription")
	selLocalizedFailureReason = objc.RegisterName("localizedFailureReason")
	selCode                   = objc.RegisterName("code")
	selCount                  = objc.RegisterName("count")
	selObjectAtIndex          = objc.RegisterName("objectAtIndex:")
	selUserInfo               = objc.RegisterName("userInfo")
	selObjectForKey           = objc.RegisterName("objectForKey:")
)

// MTLCompileOptions selectors.
var (
	selSetFastMathEnabled = objc.RegisterName("setFastMathEnabled:") // deprecated in macOS 15
	selSetMathMode        = objc.RegisterName("setMathMode:")        // macOS 15+
	selSetLanguageVersion = objc.RegisterName("setLanguageVersion:")
)

// MTLDevice selectors.
var (
	selName                         = objc.RegisterName("name")
	selRecommendedMaxWorkingSetSize = objc.RegisterName("recommendedMaxWorkingSetSize")
	selMaxBufferLength              = objc.RegisterName("maxBufferLength")
	selHasUnifiedMemory             = objc.RegisterName("hasUnifiedMemory")
	selMaxThreadgroupMemoryLength   = objc.RegisterName("maxThreadgroupMemoryLength")
	selCurrentAllocatedSize         = objc.RegisterName("currentAllocatedSize")
	selNewCommandQueue              = objc.RegisterName("newCommandQueue")
	selNewLibraryWithSource         = objc.RegisterName("newLibraryWithSource:options:error:")
	selNewPipelineWithFunction      = objc.RegisterName("newComputePipelineStateWithFunction:error:")
	selNewBufferWithLength          = objc.RegisterName("newBufferWithLength:options:")
	selNewBufferWithBytesNoCopy     = objc.RegisterName("newBufferWithBytesNoCopy:length:options:deallocator:")
	selSupportsFamily               = objc.RegisterName("supportsFamily:")
)

// Pipeline cache selectors (cache_darwin.go): NSURL, NSArray,
// MTLBinaryArchive(Descriptor), MTLComputePipelineDescriptor.
var (
	selFileURLWithPath                  = objc.RegisterName("fileURLWithPath:")
	selArrayWithObject                  = objc.RegisterName("arrayWithObject:")
	selSetURL                           = objc.RegisterName("setUrl:")
	selNewBinaryArchiveWithDescriptor   = objc.RegisterName("newBinaryArchiveWithDescriptor:error:")
	selAddComputePipelineFunctions      = objc.RegisterName("addComputePipelineFunctionsWithDescriptor:error:")
	selSerializeToURL                   = objc.RegisterName("serializeToURL:error:")
	selSetComputeFunction               = objc.RegisterName("setComputeFunction:")
	selSetBinaryArchives                = objc.RegisterName("setBinaryArchives:")
	selNewPipelineWithDescriptorOptions = objc.RegisterName("newComputePipelineStateWithDescriptor:options:reflection:error:")
)

// MTLLibrary selectors.
var (
	selNewFunctionWithName = objc.RegisterName("newFunctionWithName:")
	selFunctionNames       = objc.RegisterName("functionNames")
)

// MTLBuffer selectors.
var (
	selContents = objc.RegisterName("contents")
	selLength   = objc.RegisterName("length")
)

// MTLComputePipelineState selectors.
var (
	selMaxTotalThreadsPerThreadgroup = objc.RegisterName("maxTotalThreadsPerThreadgroup")
	selThreadExecutionWidth          = objc.RegisterName("threadExecutionWidth")
	selStaticThreadgroupMemoryLength = objc.RegisterName("staticThreadgroupMemoryLength")
)

// MTLCommandQueue selectors.
var (
	selCommandBufferUnretained     = objc.RegisterName("commandBufferWithUnretainedReferences")
	selCommandBufferWithDescriptor = objc.RegisterName("commandBufferWithDescriptor:") // macOS 11+
)

// MTLCommandBufferDescriptor and MTLCommandBufferEncoderInfo selectors.
var (
	selSetRetainedReferences = objc.RegisterName("setRetainedReferences:")
	selSetErrorOptions       = objc.RegisterName("setErrorOptions:")
	selErrorState            = objc.RegisterName("errorState")
	selLabel                 = objc.RegisterName("label")
)

// MTLCommandBuffer selectors.
var (
	selComputeEncoderWithType = objc.RegisterName("computeCommandEncoderWithDispatchType:")
	selCommit                 = objc.RegisterName("commit")
	selWaitUntilCompleted     = objc.RegisterName("waitUntilCompleted")
	selStatus                 = objc.RegisterName("status")
	selError                  = objc.RegisterName("error")
	selGPUStartTime           = objc.RegisterName("GPUStartTime")
	selGPUEndTime             = objc.RegisterName("GPUEndTime")
)

// MTLComputeCommandEncoder selectors.
var (
	selSetComputePipelineState    = objc.RegisterName("setComputePipelineState:")
	selSetBufferOffsetAtIndex     = objc.RegisterName("setBuffer:offset:atIndex:")
	selSetBuffersOffsetsWithRange = objc.RegisterName("setBuffers:offsets:withRange:")
	selSetThreadgroupMemory       = objc.RegisterName("setThreadgroupMemoryLength:atIndex:")
	selDispatchThreadgroups       = objc.RegisterName("dispatchThreadgroups:threadsPerThreadgroup:")
	selMemoryBarrierWithScope     = objc.RegisterName("memoryBarrierWithScope:")
	selEndEncoding                = objc.RegisterName("endEncoding")
)

// Typed objc_msgSend trampolines, one per method shape, registered once by
// load. The comment on each names the Objective-C shape it serves.
var (
	msgID      func(self objc.ID, cmd objc.SEL) objc.ID          // - (id)m
	msgVoid    func(self objc.ID, cmd objc.SEL)                  // - (void)m
	msgUint    func(self objc.ID, cmd objc.SEL) uint             // - (NSUInteger)m, - (uint64_t)m
	msgInt     func(self objc.ID, cmd objc.SEL) int              // - (NSInteger)m
	msgBool    func(self objc.ID, cmd objc.SEL) bool             // - (BOOL)m
	msgDouble  func(self objc.ID, cmd objc.SEL) float64          // - (double)m
	msgPointer func(self objc.ID, cmd objc.SEL) unsafe.Pointer   // - (void *)contents
	msgCString func(self objc.ID, cmd objc.SEL) string           // - (const char *)UTF8String; purego copies it
	msgRespond func(self objc.ID, cmd objc.SEL, s objc.SEL) bool // - (BOOL)respondsToSelector:(SEL)
	msgBoolInt func(self objc.ID, cmd objc.SEL, v int) bool      // - (BOOL)supportsFamily:(MTLGPUFamily)
	msgIDUint  func(self objc.ID, cmd objc.SEL, a uint) objc.ID  // - (id)m:(NSUInteger)
	msgIDID    func(self objc.ID, cmd objc.SEL, a objc.ID) objc.ID
	msgSetBool func(self objc.ID, cmd objc.SEL, v bool)
	msgSetInt  func(self objc.ID, cmd objc.SEL, v int)
	msgSetUint func(self objc.ID, cmd objc.SEL, v uint)
	msgSetID   func(self objc.ID, cmd objc.SEL, v objc.ID)

	// - (BOOL)m:(id)error:(NSError **): addComputePipelineFunctionsWithDescriptor:error:, serializeToURL:error:
	msgBoolIDErr func(self objc.ID, cmd objc.SEL, a objc.ID, err *objc.ID) bool
	// - (id<MTLComputePipelineState>)newComputePipelineStateWithDescriptor:(MTLComputePipelineDescriptor *)
	//   options:(MTLPipelineOption)reflection:(MTLAutoreleasedComputePipelineReflection *)error:(NSError **)
	msgNewPipelineDesc func(self objc.ID, cmd objc.SEL, desc objc.ID, opts uint, reflection uintptr, err *objc.ID) objc.ID

	// - (instancetype)initWithBytes:(const void *)length:(NSUInteger)encoding:(NSStringEncoding)
	msgInitWithBytes func(self objc.ID, cmd objc.SEL, p unsafe.Pointer, n, enc uint) objc.ID
	// - (id<MTLLibrary>)newLibraryWithSource:(NSString *)options:(MTLCompileOptions *)error:(NSError **)
	msgNewLibrary func(self objc.ID, cmd objc.SEL, src, opts objc.ID, err *objc.ID) objc.ID
	// - (id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)error:(NSError **)
	msgNewPipeline func(self objc.ID, cmd objc.SEL, fn objc.ID, err *objc.ID) objc.ID
	// - (id<MTLBuffer>)newBufferWithLength:(NSUInteger)options:(MTLResourceOptions)
	msgNewBuffer func(self objc.ID, cmd objc.SEL, n, opts uint) objc.ID
	// - (id<MTLBuffer>)newBufferWithBytesNoCopy:(void *)length:(NSUInteger)options:(MTLResourceOptions)deallocator:(block)
	msgNewBufferNoCopy func(self objc.ID, cmd objc.SEL, p unsafe.Pointer, n, opts uint, dealloc uintptr) objc.ID

	// dispatchThreadgroups:threadsPerThreadgroup: on amd64 (hot_darwin_amd64.go);
	// the other encoder methods are SyscallN stubs (encoder.send).
	msgDispatch func(self objc.ID, cmd objc.SEL, groups, threads mtlSize)
)

// msgSendAddr is objc_msgSend's address, for the hot stubs' SyscallN.
var msgSendAddr uintptr

// C functions.
var (
	autoreleasePoolPush          func() uintptr
	autoreleasePoolPop           func(pool uintptr)
	pthreadSelf                  func() uintptr
	mtlCreateSystemDefaultDevice func() objc.ID
	mtlCopyAllDevices            func() objc.ID
)

// Classes, looked up once the frameworks are loaded.
var (
	classNSString                   objc.ID
	classMTLCompileOptions          objc.ID
	classMTLCommandBufferDescriptor objc.ID // 0 before macOS 11

	classNSURL                        objc.ID
	classNSArray                      objc.ID
	classMTLBinaryArchiveDescriptor   objc.ID // 0 before macOS 11
	classMTLComputePipelineDescriptor objc.ID
)

// keyEncoderInfo is the NSString MTLCommandBufferEncoderInfoErrorKey (the
// userInfo key of per-encoder execution status), or 0 if Metal lacks it.
var keyEncoderInfo objc.ID

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens the frameworks and registers the trampolines. It is safe to call
// from several goroutines; only the first call does the work.
func load() error {
	loadOnce.Do(func() { loadErr = doLoad() })
	return loadErr
}

func doLoad() error {
	libobjc, err := purego.Dlopen(libobjcPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("dlopen %s: %w", libobjcPath, err)
	}
	for _, path := range []string{foundationPath, coreGraphicsPath} {
		if _, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			return fmt.Errorf("dlopen %s: %w", path, err)
		}
	}
	libmetal, err := purego.Dlopen(metalFrameworkPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("dlopen %s: %w", metalFrameworkPath, err)
	}
	sym := func(lib uintptr, name string) (uintptr, error) {
		p, err := purego.Dlsym(lib, name)
		if err != nil {
			return 0, fmt.Errorf("dlsym %s: %w", name, err)
		}
		return p, nil
	}
	send, err := sym(libobjc, "objc_msgSend")
	if err != nil {
		return err
	}
	msgSendAddr = send
	for _, f := range []struct {
		fptr any
		lib  uintptr
		name string
	}{
		{&autoreleasePoolPush, libobjc, "objc_autoreleasePoolPush"},
		{&autoreleasePoolPop, libobjc, "objc_autoreleasePoolPop"},
		{&pthreadSelf, purego.RTLD_DEFAULT, "pthread_self"},
		{&mtlCreateSystemDefaultDevice, libmetal, "MTLCreateSystemDefaultDevice"},
		{&mtlCopyAllDevices, libmetal, "MTLCopyAllDevices"},
	} {
		p, err := sym(f.lib, f.name)
		if err != nil {
			return err
		}
		purego.RegisterFunc(f.fptr, p)
	}
	for _, fptr := range []any{
		&msgID, &msgVoid, &msgUint, &msgInt, &msgBool, &msgDouble, &msgPointer, &msgCString,
		&msgRespond, &msgBoolInt, &msgIDUint, &msgIDID, &msgSetBool, &msgSetInt, &msgSetUint, &msgSetID,
		&msgBoolIDErr, &msgNewPipelineDesc,
		&msgInitWithBytes, &msgNewLibrary, &msgNewPipeline, &msgNewBuffer, &msgNewBufferNoCopy,
		&msgDispatch,
	} {
		purego.RegisterFunc(fptr, send)
	}
	classNSString = objc.ID(objc.GetClass("NSString"))
	classMTLCompileOptions = objc.ID(objc.GetClass("MTLCompileOptions"))
	classMTLCommandBufferDescriptor = objc.ID(objc.GetClass("MTLCommandBufferDescriptor"))
	classNSURL = objc.ID(objc.GetClass("NSURL"))
	classNSArray = objc.ID(objc.GetClass("NSArray"))
	classMTLBinaryArchiveDescriptor = objc.ID(objc.GetClass("MTLBinaryArchiveDescriptor"))
	classMTLComputePipelineDescriptor = objc.ID(objc.GetClass("MTLComputePipelineDescriptor"))
	if p, err := purego.Dlsym(libmetal, "MTLCommandBufferEncoderInfoErrorKey"); err == nil && p != 0 {
		keyEncoderInfo = **(**objc.ID)(unsafe.Pointer(&p)) // the symbol is an NSString * variable
	}
	if classNSString == 0 || classMTLCompileOptions == 0 {
		return errors.New("objc_getClass: NSString or MTLCompileOptions not found")
	}
	return nil
}

// withPool runs f inside an autorelease pool, on one OS thread.
func withPool(f func()) {
	runtime.LockOSThread()
	pool := autoreleasePoolPush()
	defer func() {
		autoreleasePoolPop(pool)
		runtime.UnlockOSThread()
	}()
	f()
}

// release sends release to an owned object; 0 is ignored.
func release(id objc.ID) {
	if id != 0 {
		msgVoid(id, selRelease)
	}
}

// retain takes ownership of a borrowed object; 0 is ignored.
func retain(id objc.ID) objc.ID {
	if id != 0 {
		msgID(id, selRetain)
	}
	return id
}

// newNSString returns an owned NSString holding a copy of s, or 0 if s is
// not valid UTF-8. The caller releases it.
func newNSString(s string) objc.ID {
	b := []byte(s) // initWithBytes copies; b only has to live through the call
	str := msgID(classNSString, selAlloc)
	str = msgInitWithBytes(str, selInitWithBytesLengthEnc, unsafe.Pointer(unsafe.SliceData(b)), uint(len(b)), nsUTF8StringEncoding)
	runtime.KeepAlive(b)
	return str
}

// goString copies a borrowed NSString into Go. Call it inside withPool.
func goString(str objc.ID) string {
	if str == 0 {
		return ""
	}
	return msgCString(str, selUTF8String)
}

// nsErrorText returns an NSError's localizedDescription (for the Metal
// compiler, the full compiler log) plus its code. Call it inside withPool.
func nsErrorText(nserr objc.ID) string {
	if nserr == 0 {
		return "unknown error (no NSError)"
	}
	desc := goString(msgID(nserr, selLocalizedDescription))
	if reason := goString(msgID(nserr, selLocalizedFailureReason)); reason != "" && reason != desc {
		desc += ": " + reason
	}
	return fmt.Sprintf("%s (code %d)", desc, msgInt(nserr, selCode))
}
