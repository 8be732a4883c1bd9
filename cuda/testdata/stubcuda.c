// stubcuda.c: a fake libcuda.so.1 for package cuda's tests (cuda_test.go
// builds it with clang into a temporary directory and opens it through
// Options.Library), so the host plumbing runs on machines without a GPU:
// argument marshalling, error naming, graphs and parameter updates, the
// unavailable paths.
//
// It models only what the tests need:
//   - one device ("ingot stub GPU", compute capability 9.0, 4 SMs, 1 GiB);
//     stub_set_devices and stub_set_init_result fake machines without one;
//   - a primary context that is current per thread (calls on a thread
//     without it fail with CUDA_ERROR_INVALID_CONTEXT, as the driver's do);
//   - device memory = host malloc, tracked, so copies and frees of bad
//     pointers fail with CUDA_ERROR_INVALID_VALUE;
//   - modules "load" any text with a .version directive, parsing each
//     .entry's parameter sizes; "stub-jit-error" in the text fails the load
//     with a ptxas-style message in the error log;
//   - every launch is recorded with its dimensions and the bytes of its
//     parameters (read through kernelParams with the entry's sizes), for
//     stub_launch_get; an entry named stub_add_u32(ptr, n, v) also runs:
//     ptr[i] += v for i < n;
//   - stream capture records launches as kernel nodes; instantiated graphs
//     replay them (recorded and run like launches); kernel node parameters
//     of an instantiation can be replaced;
//   - every handle is checked against the live objects: a bad or destroyed
//     one gives CUDA_ERROR_INVALID_HANDLE.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_IMAGE = 200,
	INVALID_CONTEXT = 201,
	INVALID_PTX = 218,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	ILLEGAL_ADDRESS = 700,
	CAPTURE_UNSUPPORTED = 900,
};

static const struct {
	int code;
	const char *name, *msg;
} errors[] = {
	{OK, "CUDA_SUCCESS", "no error"},
	{INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
};

// ---- objects and handles ---------------------------------------------------------------
enum { K_CTX = 1, K_STREAM, K_EVENT, K_MODULE, K_FUNC, K_GRAPH, K_EXEC, K_NODE };

#define MAX_PARAMS 32
#define MAX_NODES 256

struct launch {
	char name[64];
	unsigned dims[7]; // grid xyz, block xyz, shared bytes
	int nparams;
	int size[MAX_PARAMS];
	unsigned char bytes[1024];
	int nbytes;
	void *stream;
	int dependent; // launched with programmatic stream serialization
};

struct obj {
	int kind;
	int live;
	// K_MODULE
	char *ptx;
	// K_FUNC
	struct obj *module;
	char name[64];
	int nparams, size[MAX_PARAMS];
	// K_STREAM
	int capturing;
	struct obj *graph, *last;
	// K_EVENT
	long tick;
	// K_GRAPH, K_EXEC
	struct obj *nodes[MAX_NODES];
	struct launch node_launch[MAX_NODES]; // K_EXEC: its own copies
	int nnodes;
	// K_NODE
	struct obj *fn;
	struct launch launch;
};

static struct obj *objs[4096];
static int nobjs;

static struct obj *new_obj(int kind) {
	struct obj *o = calloc(1, sizeof *o);
	o->kind = kind;
	o->live = 1;
	if (nobjs < (int)(sizeof objs / sizeof objs[0]))
		objs[nobjs++] = o;
	return o;
}

static struct obj *valid(void *h, int kind) {
	for (int i = 0; i < nobjs; i++)
		if (objs[i] == h && objs[i]->live && objs[i]->kind == kind)
			return objs[i];
	return NULL;
}

// ---- device, context ---------------------------------------------------------------------
static int ndevices = 1, init_result = OK, initialized;
static struct obj *primary;
static int primary_refs;
static __thread struct obj *current;

static int cc_major = 9, cc_minor = 0; // compute capability (an H100's)

void stub_set_devices(int n) { ndevices = n; }
void stub_set_cc(int major, int minor) { cc_major = major, cc_minor = minor; }
void stub_set_init_result(int r) { init_result = r; }

CUresult cuGetErrorName(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == r) {
			*s = errors[i].name;
			return OK;
		}
	*s = NULL;
	return INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == r) {
			*s = errors[i].msg;
			return OK;
		}
	*s = NULL;
	return INVALID_VALUE;
}

CUresult cuInit(unsigned flags) {
	if (flags != 0)
		return INVALID_VALUE;
	if (init_result != OK)
		return init_result;
	initialized = 1;
	return OK;
}

CUresult cuDriverGetVersion(int *v) {
	*v = 12080;
	return OK;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialized)
		return NOT_INITIALIZED;
	*n = ndevices;
	return OK;
}

CUresult cuDeviceGet(int *d, int ordinal) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ndevices)
		return INVALID_DEVICE;
	*d = ordinal;
	return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
	if (dev < 0 || dev >= ndevices)
		return INVALID_DEVICE;
	snprintf(name, len, "ingot stub GPU");
	return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
	if (dev < 0 || dev >= ndevices)
		return INVALID_DEVICE;
	switch (attr) {
	case 1: // MAX_THREADS_PER_BLOCK
		*v = 1024;
		break;
	case 10: // WARP_SIZE
		*v = 32;
		break;
	case 16: // MULTIPROCESSOR_COUNT
		*v = 4;
		break;
	case 75: // COMPUTE_CAPABILITY_MAJOR
		*v = cc_major;
		break;
	case 76:
		*v = cc_minor;
		break;
	default:
		*v = 0;
	}
	return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *n, int dev) {
	if (dev < 0 || dev >= ndevices)
		return INVALID_DEVICE;
	*n = 1ul << 30;
	return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
	if (dev < 0 || dev >= ndevices)
		return INVALID_DEVICE;
	if (!primary)
		primary = new_obj(K_CTX);
	primary_refs++;
	*ctx = primary;
	return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
	if (dev < 0 || dev >= ndevices || primary_refs == 0)
		return INVALID_DEVICE;
	primary_refs--;
	return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
	if (ctx && !valid(ctx, K_CTX))
		return INVALID_CONTEXT;
	current = ctx;
	return OK;
}

#define NEED_CTX                                                                                   \
	if (!current)                                                                              \
	return INVALID_CONTEXT

CUresult cuCtxSynchronize(void) {
	NEED_CTX;
	return OK;
}

// ---- memory ------------------------------------------------------------------------------
struct alloc {
	char *p;
	size_t n;
	int host;
};
static struct alloc allocs[4096];
static int nallocs;
static size_t allocated;

long stub_live_allocs(void) {
	long n = 0;
	for (int i = 0; i < nallocs; i++)
		n += allocs[i].p != NULL;
	return n;
}

// inside reports whether [p, p+n) lies in one live device allocation.
static int inside(CUdeviceptr p, size_t n) {
	for (int i = 0; i < nallocs; i++)
		if (allocs[i].p && !allocs[i].host && (char *)p >= allocs[i].p && (char *)p + n <= allocs[i].p + allocs[i].n)
			return 1;
	return 0;
}

static CUresult do_alloc(void **out, size_t n, int host) {
	NEED_CTX;
	if (n == 0)
		return INVALID_VALUE;
	if (allocated + n > (1ul << 30))
		return OUT_OF_MEMORY;
	char *p = calloc(1, n);
	if (!p || nallocs == 4096)
		return OUT_OF_MEMORY;
	allocs[nallocs++] = (struct alloc){p, n, host};
	allocated += n;
	*out = p;
	return OK;
}

static CUresult do_free(void *p, int host) {
	NEED_CTX;
	for (int i = 0; i < nallocs; i++)
		if (allocs[i].p == p && allocs[i].host == host) {
			free(p);
			allocated -= allocs[i].n;
			allocs[i].p = NULL;
			return OK;
		}
	return INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return do_alloc((void **)p, n, 0); }
CUresult cuMemFree_v2(CUdeviceptr p) { return do_free((void *)p, 0); }
CUresult cuMemAllocHost_v2(void **p, size_t n) { return do_alloc(p, n, 1); }
CUresult cuMemFreeHost(void *p) { return do_free(p, 1); }

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	NEED_CTX;
	*total = 1ul << 30;
	*free_ = *total - allocated;
	return OK;
}

static CUresult check_stream(void *s) {
	if (s && !valid(s, K_STREAM))
		return INVALID_HANDLE;
	if (s && ((struct obj *)s)->capturing)
		return CAPTURE_UNSUPPORTED; // the stub captures kernels only
	return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, void *s) {
	NEED_CTX;
	CUresult r = check_stream(s);
	if (r != OK)
		return r;
	if (!inside(p, n))
		return INVALID_VALUE;
	memset((void *)p, v, n);
	return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) { return cuMemsetD8Async(p, v, n, NULL); }

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s) {
	NEED_CTX;
	CUresult r = check_stream(s);
	if (r != OK)
		return r;
	if (!inside(dst, n) || !src)
		return INVALID_VALUE;
	memcpy((void *)dst, src, n);
	return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s) {
	NEED_CTX;
	CUresult r = check_stream(s);
	if (r != OK)
		return r;
	if (!inside(src, n) || !dst)
		return INVALID_VALUE;
	memcpy(dst, (void *)src, n);
	return OK;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
	NEED_CTX;
	CUresult r = check_stream(s);
	if (r != OK)
		return r;
	if (!inside(dst, n) || !inside(src, n))
		return INVALID_VALUE;
	memmove((void *)dst, (void *)src, n);
	return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return cuMemcpyHtoDAsync_v2(dst, src, n, NULL); }
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoHAsync_v2(dst, src, n, NULL); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoDAsync_v2(dst, src, n, NULL); }

// ---- streams, events -------------------------------------------------------------------------
CUresult cuStreamCreate(void **s, unsigned flags) {
	NEED_CTX;
	if (flags > 1)
		return INVALID_VALUE;
	*s = new_obj(K_STREAM);
	return OK;
}

CUresult cuStreamDestroy_v2(void *s) {
	struct obj *o = valid(s, K_STREAM);
	if (!o)
		return INVALID_HANDLE;
	o->live = 0;
	return OK;
}

CUresult cuStreamSynchronize(void *s) {
	NEED_CTX;
	return s && !valid(s, K_STREAM) ? INVALID_HANDLE : OK;
}

static long ticks;

CUresult cuEventCreate(void **e, unsigned flags) {
	NEED_CTX;
	*e = new_obj(K_EVENT);
	return OK;
}
CUresult cuEventDestroy_v2(void *e) {
	struct obj *o = valid(e, K_EVENT);
	if (!o)
		return INVALID_HANDLE;
	o->live = 0;
	return OK;
}
CUresult cuEventRecord(void *e, void *s) {
	struct obj *o = valid(e, K_EVENT);
	if (!o || (s && !valid(s, K_STREAM)))
		return INVALID_HANDLE;
	o->tick = ++ticks;
	return OK;
}
CUresult cuEventSynchronize(void *e) { return valid(e, K_EVENT) ? OK : INVALID_HANDLE; }
// Each event recorded between two takes 0.5 ms.
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
	struct obj *a = valid(start, K_EVENT), *b = valid(end, K_EVENT);
	if (!a || !b || !a->tick || !b->tick)
		return INVALID_HANDLE;
	*ms = 0.5f * (float)(b->tick - a->tick);
	return OK;
}

// ---- modules, functions ----------------------------------------------------------------------
static void write_log(void **vals, int idx_buf, int idx_size, const char *msg) {
	if (idx_buf < 0 || idx_size < 0)
		return;
	char *buf = vals[idx_buf];
	size_t cap = (size_t)(uintptr_t)vals[idx_size];
	if (!buf || cap == 0)
		return;
	snprintf(buf, cap, "%s", msg);
	vals[idx_size] = (void *)(uintptr_t)(strlen(msg) < cap ? strlen(msg) : cap - 1);
}

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals) {
	NEED_CTX;
	const char *text = image;
	int ebuf = -1, esize = -1, ibuf = -1, isize = -1;
	for (unsigned i = 0; i < n; i++) {
		switch (opts[i]) {
		case 2: { // CU_JIT_WALL_TIME: float milliseconds, written into the value slot
			float ms = 1.5f;
			uint32_t bits;
			memcpy(&bits, &ms, 4);
			vals[i] = (void *)(uintptr_t)bits;
			break;
		}
		case 3:
			ibuf = i;
			break;
		case 4:
			isize = i;
			break;
		case 5:
			ebuf = i;
			break;
		case 6:
			esize = i;
			break;
		default:
			return INVALID_VALUE;
		}
	}
	if (!text || !strstr(text, ".version"))
		return INVALID_IMAGE;
	if (strstr(text, "stub-jit-error")) {
		write_log(vals, ebuf, esize, "ptxas application ptx input, line 1; error   : stub-jit-error requested");
		return INVALID_PTX;
	}
	write_log(vals, ibuf, isize, "");
	struct obj *o = new_obj(K_MODULE);
	o->ptx = strdup(text);
	*mod = o;
	return OK;
}

CUresult cuModuleUnload(void *mod) {
	struct obj *o = valid(mod, K_MODULE);
	if (!o)
		return INVALID_HANDLE;
	o->live = 0;
	return OK;
}

// parse_entry finds `.entry name(` in ptx and fills f's parameter sizes.
static int parse_entry(const char *ptx, const char *name, struct obj *f) {
	char pat[96];
	snprintf(pat, sizeof pat, ".entry %s(", name);
	const char *p = strstr(ptx, pat);
	if (!p)
		return 0;
	p += strlen(pat);
	const char *end = strchr(p, ')');
	f->nparams = 0;
	while (end && (p = strstr(p, ".param")) && p < end && f->nparams < MAX_PARAMS) {
		const char *eol = strpbrk(p, ",\n)");
		int size = 0;
		const char *br = strchr(p, '[');
		if (br && br < eol)
			size = atoi(br + 1);
		else if (strstr(p, ".u64") && strstr(p, ".u64") < eol)
			size = 8;
		else if (strstr(p, ".b64") && strstr(p, ".b64") < eol)
			size = 8;
		else
			size = 4;
		f->size[f->nparams++] = size;
		p = eol;
	}
	return 1;
}

CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
	NEED_CTX;
	struct obj *m = valid(mod, K_MODULE);
	if (!m)
		return INVALID_HANDLE;
	struct obj *f = new_obj(K_FUNC);
	if (strlen(name) >= sizeof f->name || !parse_entry(m->ptx, name, f)) {
		f->live = 0;
		return NOT_FOUND;
	}
	f->module = m;
	strcpy(f->name, name);
	*fn = f;
	return OK;
}

CUresult cuFuncGetAttribute(int *v, int attr, void *fn) {
	if (!valid(fn, K_FUNC))
		return INVALID_HANDLE;
	*v = attr == 0 ? 1024 : attr == 4 ? 32 : 0;
	return OK;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int v) {
	if (!valid(fn, K_FUNC))
		return INVALID_HANDLE;
	return attr == 8 && v >= 0 && v <= 227 * 1024 ? OK : INVALID_VALUE;
}

// ---- launches ------------------------------------------------------------------------------------
static struct launch launches[1024];
static int nlaunches;

static int nupdates, ninstances; // cuGraphExecKernelNodeSetParams calls that set a node; instantiations

void stub_reset(void) { nlaunches = nupdates = ninstances = 0; }
int stub_node_updates(void) { return nupdates; }
int stub_graph_instances(void) { return ninstances; }
int stub_launch_count(void) { return nlaunches; }

// stub_launch_get copies launch i: its name, its 7 dims and its parameter
// bytes (the slots concatenated, unpadded); it returns the byte count or -1.
int stub_launch_get(int i, char *name, int namecap, unsigned *dims, unsigned char *bytes, int cap) {
	if (i < 0 || i >= nlaunches || i >= 1024)
		return -1;
	struct launch *l = &launches[i];
	snprintf(name, namecap, "%s", l->name);
	memcpy(dims, l->dims, sizeof l->dims);
	int n = l->nbytes < cap ? l->nbytes : cap;
	memcpy(bytes, l->bytes, n);
	return l->nbytes;
}

// make_launch validates a launch of f and captures its parameter bytes.
static CUresult make_launch(struct launch *l, struct obj *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			    unsigned by, unsigned bz, unsigned shared, void **params, void **extra) {
	if (!f)
		return INVALID_HANDLE;
	if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long)bx * by * bz > 1024 || shared > 48 * 1024 || extra)
		return INVALID_VALUE;
	if (f->nparams > 0 && !params)
		return INVALID_VALUE;
	memset(l, 0, sizeof *l);
	snprintf(l->name, sizeof l->name, "%s", f->name);
	unsigned d[7] = {gx, gy, gz, bx, by, bz, shared};
	memcpy(l->dims, d, sizeof d);
	l->nparams = f->nparams;
	for (int i = 0; i < f->nparams; i++) {
		if (!params[i] || l->nbytes + f->size[i] > (int)sizeof l->bytes)
			return INVALID_VALUE;
		l->size[i] = f->size[i];
		memcpy(l->bytes + l->nbytes, params[i], f->size[i]);
		l->nbytes += f->size[i];
	}
	return OK;
}

// run records l and runs it if the stub knows the kernel.
static CUresult run(const struct launch *l) {
	if (nlaunches < 1024)
		launches[nlaunches] = *l;
	nlaunches++;
	if (!strcmp(l->name, "stub_add_u32") && l->nparams == 3) {
		CUdeviceptr p;
		uint32_t n, v;
		memcpy(&p, l->bytes, 8);
		memcpy(&n, l->bytes + 8, 4);
		memcpy(&v, l->bytes + 12, 4);
		if (!inside(p, 4ul * n))
			return ILLEGAL_ADDRESS;
		for (uint32_t i = 0; i < n; i++)
			((uint32_t *)p)[i] += v;
	}
	return OK;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shared, void *stream, void **params, void **extra) {
	NEED_CTX;
	struct obj *s = NULL;
	if (stream && !(s = valid(stream, K_STREAM)))
		return INVALID_HANDLE;
	struct launch l;
	CUresult r = make_launch(&l, valid(fn, K_FUNC), gx, gy, gz, bx, by, bz, shared, params, extra);
	if (r != OK)
		return r;
	if (s && s->capturing) {
		struct obj *g = s->graph;
		if (g->nnodes == MAX_NODES)
			return OUT_OF_MEMORY;
		struct obj *node = new_obj(K_NODE);
		node->fn = valid(fn, K_FUNC);
		node->launch = l;
		g->nodes[g->nnodes++] = node;
		s->last = node;
		return OK;
	}
	return run(&l);
}

// cuLaunchKernelEx: the CUDA 12 launch with a config and attributes; the stub
// knows CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6) and
// records it (stub_launch_dependent), and refuses other attributes.
struct launch_attr {
	int id;
	int pad;
	union {
		int i;
		char bytes[64];
	} value;
};
struct launch_config {
	unsigned gx, gy, gz, bx, by, bz, shared;
	void *stream;
	struct launch_attr *attrs;
	unsigned nattrs;
};

CUresult cuLaunchKernelEx(const struct launch_config *c, void *fn, void **params, void **extra) {
	NEED_CTX;
	if (!c || (c->nattrs && !c->attrs))
		return INVALID_VALUE;
	int dependent = 0;
	for (unsigned i = 0; i < c->nattrs; i++) {
		if (c->attrs[i].id != 6)
			return INVALID_VALUE;
		dependent = c->attrs[i].value.i != 0;
	}
	int before = nlaunches;
	struct obj *s = c->stream ? valid(c->stream, K_STREAM) : NULL;
	CUresult r = cuLaunchKernel(fn, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->shared, c->stream, params, extra);
	if (r != OK)
		return r;
	if (s && s->capturing)
		s->last->launch.dependent = dependent;
	else if (before < 1024 && nlaunches > before)
		launches[before].dependent = dependent;
	return OK;
}

int stub_launch_dependent(int i) { return i >= 0 && i < nlaunches && i < 1024 ? launches[i].dependent : -1; }

// ---- graphs ---------------------------------------------------------------------------------------
CUresult cuStreamBeginCapture_v2(void *stream, int mode) {
	NEED_CTX;
	struct obj *s = valid(stream, K_STREAM);
	if (!s)
		return INVALID_HANDLE; // the legacy stream cannot capture
	if (s->capturing || mode < 0 || mode > 2)
		return INVALID_VALUE;
	s->capturing = 1;
	s->graph = new_obj(K_GRAPH);
	s->last = NULL;
	return OK;
}

CUresult cuStreamEndCapture(void *stream, void **graph) {
	struct obj *s = valid(stream, K_STREAM);
	if (!s)
		return INVALID_HANDLE;
	if (!s->capturing)
		return INVALID_VALUE;
	s->capturing = 0;
	*graph = s->graph;
	s->graph = NULL;
	return OK;
}

CUresult cuStreamGetCaptureInfo_v2(void *stream, int *status, unsigned long long *id, void **graph,
				   void *const **deps, size_t *ndeps) {
	struct obj *s = valid(stream, K_STREAM);
	if (!s)
		return INVALID_HANDLE;
	*status = s->capturing ? 1 : 0;
	if (id)
		*id = (unsigned long long)(uintptr_t)s->graph;
	if (graph)
		*graph = s->graph;
	if (deps)
		*deps = (void *const *)&s->last;
	if (ndeps)
		*ndeps = s->capturing && s->last ? 1 : 0;
	return OK;
}

CUresult cuGraphGetNodes(void *graph, void **nodes, size_t *n) {
	struct obj *g = valid(graph, K_GRAPH);
	if (!g || !n)
		return INVALID_HANDLE;
	if (nodes) {
		size_t k = *n < (size_t)g->nnodes ? *n : (size_t)g->nnodes;
		for (size_t i = 0; i < k; i++)
			nodes[i] = g->nodes[i];
	}
	*n = g->nnodes;
	return OK;
}

CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
	NEED_CTX;
	struct obj *g = valid(graph, K_GRAPH);
	if (!g)
		return INVALID_HANDLE;
	struct obj *e = new_obj(K_EXEC);
	ninstances++;
	e->nnodes = g->nnodes;
	for (int i = 0; i < g->nnodes; i++) {
		e->nodes[i] = g->nodes[i];
		e->node_launch[i] = g->nodes[i]->launch;
	}
	*exec = e;
	return OK;
}

CUresult cuGraphLaunch(void *exec, void *stream) {
	NEED_CTX;
	struct obj *e = valid(exec, K_EXEC);
	if (!e || (stream && !valid(stream, K_STREAM)))
		return INVALID_HANDLE;
	for (int i = 0; i < e->nnodes; i++) {
		CUresult r = run(&e->node_launch[i]);
		if (r != OK)
			return r;
	}
	return OK;
}

// CUDA_KERNEL_NODE_PARAMS (v1).
struct kernel_node_params {
	void *func;
	unsigned gx, gy, gz, bx, by, bz, shared;
	void **params, **extra;
};

CUresult cuGraphExecKernelNodeSetParams(void *exec, void *node, const struct kernel_node_params *p) {
	struct obj *e = valid(exec, K_EXEC);
	if (!e || !p)
		return INVALID_HANDLE;
	if (!valid(node, K_NODE)) {
		for (int i = 0; i < nobjs; i++)
			if (objs[i] == node)
				return INVALID_VALUE; // a node of a destroyed graph
		return INVALID_HANDLE;
	}
	for (int i = 0; i < e->nnodes; i++)
		if (e->nodes[i] == node) {
			struct launch l;
			CUresult r = make_launch(&l, valid(p->func, K_FUNC), p->gx, p->gy, p->gz, p->bx, p->by, p->bz, p->shared,
						 p->params, p->extra);
			if (r != OK)
				return r;
			l.dependent = e->node_launch[i].dependent; // an edge's kind, not a parameter
			e->node_launch[i] = l;
			nupdates++;
			return OK;
		}
	return INVALID_VALUE; // not a node of this graph
}

// cuGraphDestroy also ends its nodes, as the driver does: an instantiation
// keeps running, but SetParams can no longer name them.
CUresult cuGraphDestroy(void *graph) {
	struct obj *g = valid(graph, K_GRAPH);
	if (!g)
		return INVALID_HANDLE;
	for (int i = 0; i < g->nnodes; i++)
		g->nodes[i]->live = 0;
	g->live = 0;
	return OK;
}

CUresult cuGraphExecDestroy(void *exec) {
	struct obj *e = valid(exec, K_EXEC);
	if (!e)
		return INVALID_HANDLE;
	e->live = 0;
	return OK;
}
