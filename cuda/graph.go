package cuda

import (
	"encoding/binary"
	"unsafe"
)

// A Graph is a recorded DAG of device work (CUgraph), here made by stream
// capture: [Stream.BeginCapture], the launches and copies, [Stream.EndCapture].
type Graph struct {
	c *Context
	h uintptr
}

// A GraphNode is one node of a graph (CUgraphNode).
type GraphNode uintptr

// A GraphExec is an instantiated graph (CUgraphExec): the whole recorded work
// replays with one [GraphExec.Launch], about 1 µs of GPU time per kernel.
type GraphExec struct {
	c  *Context
	h  uintptr
	kp []byte // a CUDA_KERNEL_NODE_PARAMS, preallocated for SetKernelParams
	ka uintptr
}

// BeginCapture starts recording s's work into a graph instead of running it
// (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: this thread may not make
// synchronizing calls, such as Alloc or Synchronize, until EndCapture).
func (s *Stream) BeginCapture() error {
	if err := s.c.d.need(s.c.d.cuStreamBeginCapture, "cuStreamBeginCapture"); err != nil {
		return err
	}
	return s.c.d.check("cuStreamBeginCapture", call(s.c.d.cuStreamBeginCapture, s.h, 1))
}

// EndCapture stops recording and returns the graph.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.c.d.need(s.c.d.cuStreamEndCapture, "cuStreamEndCapture"); err != nil {
		return nil, err
	}
	g := &Graph{c: s.c}
	if err := s.c.d.check("cuStreamEndCapture", call(s.c.d.cuStreamEndCapture, s.h, uintptr(unsafe.Pointer(&g.h)))); err != nil {
		return nil, err
	}
	return g, nil
}

// LastCaptured returns the node the last operation captured on s became
// (cuStreamGetCaptureInfo): call it right after a Launch to keep the node
// whose parameters change per replay.
func (s *Stream) LastCaptured() (GraphNode, error) {
	if err := s.c.d.need(s.c.d.cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo"); err != nil {
		return 0, err
	}
	var (
		status int32
		id     uint64
		graph  uintptr
		deps   *uintptr
		n      uintptr
	)
	r := call(s.c.d.cuStreamGetCaptureInfo, s.h, uintptr(unsafe.Pointer(&status)), uintptr(unsafe.Pointer(&id)),
		uintptr(unsafe.Pointer(&graph)), uintptr(unsafe.Pointer(&deps)), uintptr(unsafe.Pointer(&n)))
	if err := s.c.d.check("cuStreamGetCaptureInfo", r); err != nil {
		return 0, err
	}
	if status != 1 || n == 0 || deps == nil {
		return 0, &Error{Op: "cuStreamGetCaptureInfo", Code: ErrorInvalidValue, Name: "CUDA_ERROR_INVALID_VALUE", Msg: "the stream is not capturing or has captured nothing"}
	}
	return GraphNode(*(*uintptr)(unsafe.Add(unsafe.Pointer(deps), (n-1)*8))), nil
}

// Nodes returns the graph's nodes.
func (g *Graph) Nodes() ([]GraphNode, error) {
	if err := g.c.d.need(g.c.d.cuGraphGetNodes, "cuGraphGetNodes"); err != nil {
		return nil, err
	}
	var n uintptr
	if err := g.c.d.check("cuGraphGetNodes", call(g.c.d.cuGraphGetNodes, g.h, 0, uintptr(unsafe.Pointer(&n)))); err != nil || n == 0 {
		return nil, err
	}
	nodes := make([]GraphNode, n)
	err := g.c.d.check("cuGraphGetNodes", call(g.c.d.cuGraphGetNodes, g.h, uintptr(unsafe.Pointer(&nodes[0])), uintptr(unsafe.Pointer(&n))))
	return nodes[:n], err
}

// Instantiate makes the graph launchable.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := g.c.d.need(g.c.d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"); err != nil {
		return nil, err
	}
	if err := g.c.owner("cuGraphInstantiate"); err != nil {
		return nil, err
	}
	e := &GraphExec{c: g.c}
	if err := g.c.d.check("cuGraphInstantiate", call(g.c.d.cuGraphInstantiate, uintptr(unsafe.Pointer(&e.h)), g.h, 0)); err != nil {
		return nil, err
	}
	e.kp, e.ka = g.c.slab.alloc(kernelNodeParamsSize)
	return e, nil
}

// Destroy releases the graph. Its instantiations stay valid, but their
// nodes are the graph's: destroy it only once no SetKernelParams will name
// them (the driver answers CUDA_ERROR_INVALID_VALUE).
func (g *Graph) Destroy() error {
	return g.c.d.check("cuGraphDestroy", call(g.c.d.cuGraphDestroy, g.h))
}

// Launch enqueues the whole graph on s.
func (e *GraphExec) Launch(s *Stream) error {
	a := &e.c.args
	a[0], a[1] = e.h, s.handle()
	return e.c.d.check("cuGraphLaunch", callv(e.c.d.cuGraphLaunch, a[:2]))
}

// CUDA_KERNEL_NODE_PARAMS (v1): func, gridDim[3], blockDim[3],
// sharedMemBytes, 4 bytes of padding, kernelParams, extra.
const kernelNodeParamsSize = 56

// SetKernelParams changes kernel node n of the instantiated graph to launch f
// over grid × block with shared bytes and p's current values
// (cuGraphExecKernelNodeSetParams): per token, the position that changes in
// an otherwise identical decode step. It allocates nothing.
func (e *GraphExec) SetKernelParams(n GraphNode, f *Function, grid, block Dim3, shared int, p *Params) error {
	if err := e.c.d.need(e.c.d.cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams"); err != nil {
		return err
	}
	b, le := e.kp, binary.LittleEndian
	le.PutUint64(b[0:], uint64(f.h))
	putDims(b[8:], grid, block, shared)
	le.PutUint64(b[40:], uint64(p.addr()))
	le.PutUint64(b[48:], 0)
	a := &e.c.args
	a[0], a[1], a[2] = e.h, uintptr(n), e.ka
	r := callv(e.c.d.cuGraphExecKernelNodeSetParams, a[:3])
	if r != Success {
		return e.c.d.check("cuGraphExecKernelNodeSetParams("+f.name+")", r)
	}
	return nil
}

// Destroy releases the instantiated graph.
func (e *GraphExec) Destroy() error {
	return e.c.d.check("cuGraphExecDestroy", call(e.c.d.cuGraphExecDestroy, e.h))
}
