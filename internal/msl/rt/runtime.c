/*
 * runtime.c: the fiber runtime of ingot's MSL interpreter (internal/msl).
 *
 * Each call to ingot_msl_launch runs a range of threadgroups of one kernel on
 * the calling OS thread. Every thread of a threadgroup is a fiber with its own
 * stack; fibers run until they block at threadgroup_barrier, at a SIMD-group
 * collective or return, then the scheduler resolves collectives (per
 * simdgroup of 32 lanes, lane order) and barriers (all threads) and runs the
 * fibers again. Context switches are hand-written (x86-64 and arm64): no
 * ucontext, no syscalls on the hot path.
 *
 * Faults (SIGSEGV on a guard page, SIGFPE, SIGILL, SIGTRAP, SIGBUS) during a
 * launch are caught by our handler, which siglongjmps back to the launch and
 * reports the kernel, threadgroup and thread. Faults on other threads, or
 * outside a launch, go to the handler that was installed before (Go's).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "msl_runtime.h"

#define EXPORT __attribute__((visibility("default")))
#define STACK_SIZE (128 << 10)
#define GUARD_SIZE (16 << 10) /* >= the largest page size we run on */
#define MAX_STATIC_ALLOCS 64

/* Generated registry (registry.c). */
extern const mtl_kernel_desc mtl_kernels[];
extern const int mtl_nkernels;

/* ingot_msl_launch's argument block. Mirrored by launchArgs in device_linux.go. */
typedef struct launch_args {
	uint64_t kernel;
	uint64_t flags; /* bit 0: strict */
	uint64_t seed;
	uint32_t groups[4];  /* threadgroups per grid */
	uint32_t threads[4]; /* threads per threadgroup */
	uint64_t group_begin, group_end; /* linear threadgroup range [begin, end) */
	uint64_t buf[MTL_MAX_BUFFERS];
	uint64_t buflen[MTL_MAX_BUFFERS]; /* bytes from buf[i] to the end of its allocation */
	uint64_t tglen[MTL_MAX_BUFFERS];
	uint64_t err_group; /* out: linear index of the failing threadgroup */
	char err[1024];     /* out: message */
} launch_args;

enum { F_RUN, F_BARRIER, F_COLL, F_DONE };

typedef struct fiber {
	void *sp;
	char *stack_lo, *stack_hi;
	int state;
	unsigned idx; /* thread_index_in_threadgroup */
	uint64_t site;
	mtl_coll_fn fn;
	const void *in;
	void *out;
	unsigned arg;
	mtl_thread_info ti;
} fiber;

typedef struct static_alloc {
	const char *fn;
	int line;
	unsigned long size;
	void *p;
} static_alloc;

typedef struct worker {
	struct worker *next; /* free list */
	fiber *fibers;
	unsigned nstacks; /* stacks with guard pages set up */
	char *stacks;     /* MTL_MAX_THREADS * (GUARD_SIZE + STACK_SIZE) */
	void *sched_sp;
	fiber *cur;
	const launch_args *args;
	const mtl_kernel_desc *k;
	void *tgbufs[MTL_MAX_BUFFERS];
	char *tgmem; /* MTL_TG_LIMIT bytes, 64-aligned */
	unsigned long tgused;
	static_alloc statics[MAX_STATIC_ALLOCS];
	int nstatics;
	uint32_t tgpos[3];
	uint64_t group;
	unsigned nthreads;
	int failed;
	char *err; /* == args->err */
	size_t errlen;
	/* fault handling */
	sigjmp_buf jb;
	volatile int in_launch;
	volatile uintptr_t fault_addr;
	volatile int fault_sig;
	unsigned *order;
} worker;

/* ---- context switch ---------------------------------------------------- */

void mtl_switch(void **save_sp, void *to_sp);
void mtl_fiber_start(void);

#if defined(__x86_64__)
__asm__(".text\n"
	".p2align 4\n"
	".globl mtl_switch\n"
	".hidden mtl_switch\n"
	".type mtl_switch,@function\n"
	"mtl_switch:\n"
	"  pushq %rbp\n"
	"  pushq %rbx\n"
	"  pushq %r12\n"
	"  pushq %r13\n"
	"  pushq %r14\n"
	"  pushq %r15\n"
	"  subq $8, %rsp\n"
	"  stmxcsr (%rsp)\n"
	"  fnstcw 4(%rsp)\n"
	"  movq %rsp, (%rdi)\n"
	"  movq %rsi, %rsp\n"
	"  ldmxcsr (%rsp)\n"
	"  fldcw 4(%rsp)\n"
	"  addq $8, %rsp\n"
	"  popq %r15\n"
	"  popq %r14\n"
	"  popq %r13\n"
	"  popq %r12\n"
	"  popq %rbx\n"
	"  popq %rbp\n"
	"  ret\n"
	".size mtl_switch, .-mtl_switch\n"
	".p2align 4\n"
	".globl mtl_fiber_start\n"
	".hidden mtl_fiber_start\n"
	".type mtl_fiber_start,@function\n"
	"mtl_fiber_start:\n"
	"  movq %r12, %rdi\n"
	"  callq *%r13\n"
	"  ud2\n"
	".size mtl_fiber_start, .-mtl_fiber_start\n");

/* Initial frame, from sp upward: mxcsr|fcw, r15, r14, r13 (fn), r12 (arg), rbx, rbp (0), ret. */
static void *fiber_frame(char *top, void (*fn)(fiber *), fiber *arg) {
	uint64_t *sp = (uint64_t *)(((uintptr_t)top & ~(uintptr_t)15) - 128);
	uint32_t csr;
	uint16_t cw;
	__asm__ volatile("stmxcsr %0" : "=m"(csr));
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	sp[0] = (uint64_t)csr | ((uint64_t)cw << 32);
	sp[1] = 0;                       /* r15 */
	sp[2] = 0;                       /* r14 */
	sp[3] = (uint64_t)(uintptr_t)fn;  /* r13 */
	sp[4] = (uint64_t)(uintptr_t)arg; /* r12 */
	sp[5] = 0;                       /* rbx */
	sp[6] = 0;                       /* rbp: ends the frame-pointer chain */
	sp[7] = (uint64_t)(uintptr_t)mtl_fiber_start;
	return sp;
}
#elif defined(__aarch64__)
__asm__(".text\n"
	".p2align 4\n"
	".globl mtl_switch\n"
	".hidden mtl_switch\n"
	".type mtl_switch,%function\n"
	"mtl_switch:\n"
	"  sub sp, sp, #176\n"
	"  stp x19, x20, [sp, #0]\n"
	"  stp x21, x22, [sp, #16]\n"
	"  stp x23, x24, [sp, #32]\n"
	"  stp x25, x26, [sp, #48]\n"
	"  stp x27, x28, [sp, #64]\n"
	"  stp x29, x30, [sp, #80]\n"
	"  stp d8, d9, [sp, #96]\n"
	"  stp d10, d11, [sp, #112]\n"
	"  stp d12, d13, [sp, #128]\n"
	"  stp d14, d15, [sp, #144]\n"
	"  mrs x9, fpcr\n"
	"  str x9, [sp, #160]\n"
	"  mov x9, sp\n"
	"  str x9, [x0]\n"
	"  mov sp, x1\n"
	"  ldr x9, [sp, #160]\n"
	"  msr fpcr, x9\n"
	"  ldp x19, x20, [sp, #0]\n"
	"  ldp x21, x22, [sp, #16]\n"
	"  ldp x23, x24, [sp, #32]\n"
	"  ldp x25, x26, [sp, #48]\n"
	"  ldp x27, x28, [sp, #64]\n"
	"  ldp x29, x30, [sp, #80]\n"
	"  ldp d8, d9, [sp, #96]\n"
	"  ldp d10, d11, [sp, #112]\n"
	"  ldp d12, d13, [sp, #128]\n"
	"  ldp d14, d15, [sp, #144]\n"
	"  add sp, sp, #176\n"
	"  ret\n"
	".size mtl_switch, .-mtl_switch\n"
	".p2align 4\n"
	".globl mtl_fiber_start\n"
	".hidden mtl_fiber_start\n"
	".type mtl_fiber_start,%function\n"
	"mtl_fiber_start:\n"
	"  mov x0, x19\n"
	"  blr x20\n"
	"  brk #0\n"
	".size mtl_fiber_start, .-mtl_fiber_start\n");

/* Initial frame: x19 (arg), x20 (fn), x29 = 0, x30 = mtl_fiber_start, fpcr. */
static void *fiber_frame(char *top, void (*fn)(fiber *), fiber *arg) {
	uint64_t *sp = (uint64_t *)(((uintptr_t)top & ~(uintptr_t)15) - 256);
	uint64_t fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	memset(sp, 0, 176);
	sp[0] = (uint64_t)(uintptr_t)arg; /* x19 */
	sp[1] = (uint64_t)(uintptr_t)fn;  /* x20 */
	sp[10] = 0;                       /* x29 */
	sp[11] = (uint64_t)(uintptr_t)mtl_fiber_start; /* x30 */
	sp[20] = fpcr;
	return sp;
}
#else
#error "msl runtime: unsupported architecture (x86-64 and arm64 only)"
#endif

/* ---- workers ------------------------------------------------------------ */

static __thread worker *tls_worker __attribute__((tls_model("initial-exec")));
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static worker *pool;
static size_t page_size;

static worker *worker_get(void) {
	pthread_mutex_lock(&pool_mu);
	worker *w = pool;
	if (w)
		pool = w->next;
	pthread_mutex_unlock(&pool_mu);
	if (w)
		return w;
	w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->fibers = calloc(MTL_MAX_THREADS, sizeof(fiber));
	w->order = calloc(MTL_MAX_THREADS, sizeof(unsigned));
	size_t n = (size_t)MTL_MAX_THREADS * (GUARD_SIZE + STACK_SIZE);
	void *s = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (posix_memalign((void **)&w->tgmem, 64, MTL_TG_LIMIT + 64) != 0)
		w->tgmem = NULL;
	if (!w->fibers || !w->order || s == MAP_FAILED || !w->tgmem) {
		free(w->fibers);
		free(w->order);
		free(w->tgmem);
		free(w);
		return NULL;
	}
	w->stacks = s;
	return w;
}

static void worker_put(worker *w) {
	pthread_mutex_lock(&pool_mu);
	w->next = pool;
	pool = w;
	pthread_mutex_unlock(&pool_mu);
}

/* ensure_stacks protects the guard pages below the first n fiber stacks. */
static int ensure_stacks(worker *w, unsigned n) {
	for (; w->nstacks < n; w->nstacks++) {
		char *base = w->stacks + (size_t)w->nstacks * (GUARD_SIZE + STACK_SIZE);
		if (mprotect(base, GUARD_SIZE, PROT_NONE) != 0)
			return -1;
		fiber *f = &w->fibers[w->nstacks];
		f->stack_lo = base + GUARD_SIZE;
		f->stack_hi = f->stack_lo + STACK_SIZE;
	}
	return 0;
}

/* ---- errors ------------------------------------------------------------- */

static void thread_str(char *b, size_t n, const fiber *f) {
	const unsigned *p = f->ti.b[MTL_B_THREAD_POSITION_IN_THREADGROUP];
	snprintf(b, n, "thread (%u,%u,%u) [index %u, simdgroup %u lane %u]", p[0], p[1], p[2], f->idx,
		 f->idx / MTL_SIMD_WIDTH, f->idx % MTL_SIMD_WIDTH);
}

__attribute__((format(printf, 3, 4))) static void fail(worker *w, const fiber *f, const char *format, ...) {
	if (w->failed)
		return;
	w->failed = 1;
	char who[128] = "";
	if (f)
		thread_str(who, sizeof who, f);
	int n = snprintf(w->err, w->errlen, "%s: threadgroup (%u,%u,%u)%s%s: ", w->k->name, w->tgpos[0],
			 w->tgpos[1], w->tgpos[2], f ? " " : "", who);
	if (n < 0 || (size_t)n >= w->errlen)
		return;
	va_list ap;
	va_start(ap, format);
	vsnprintf(w->err + n, w->errlen - n, format, ap);
	va_end(ap);
}

/* ---- fiber-side entry points ------------------------------------------- */

static void yield(worker *w, fiber *f) { mtl_switch(&f->sp, w->sched_sp); }

/* site hashes the return-address chain of the current fiber, so lanes are
 * grouped by dynamic call site (kernels are compiled with frame pointers). */
static uint64_t site(const fiber *f) {
	uint64_t h = 1469598103934665603ull;
	void **fp = __builtin_frame_address(0);
	for (int depth = 0; depth < 64 && fp && (char *)fp >= f->stack_lo && (char *)fp < f->stack_hi; depth++) {
		h = (h ^ (uint64_t)(uintptr_t)fp[1]) * 1099511628211ull;
		void **next = fp[0];
		if (next <= fp)
			break;
		fp = next;
	}
	return h;
}

static worker *current(const char *what) {
	worker *w = tls_worker;
	if (!w || !w->cur) {
		/* Not inside a launch: a kernel helper was called from the host. */
		fprintf(stderr, "msl runtime: %s called outside a kernel launch\n", what);
		abort();
	}
	return w;
}

EXPORT void mtl_rt_barrier(void) {
	worker *w = current("threadgroup_barrier");
	fiber *f = w->cur;
	f->site = site(f);
	f->state = F_BARRIER;
	yield(w, f);
}

EXPORT void mtl_rt_collective(mtl_coll_fn fn, const void *in, void *out, unsigned arg) {
	worker *w = current("simd collective");
	fiber *f = w->cur;
	f->site = site(f);
	f->fn = fn;
	f->in = in;
	f->out = out;
	f->arg = arg;
	f->state = F_COLL;
	yield(w, f);
}

EXPORT unsigned mtl_rt_lane(void) { return current("simd lane query")->cur->idx % MTL_SIMD_WIDTH; }

EXPORT void mtl_rt_fail(const char *msg) {
	worker *w = current("mtl_rt_fail");
	fiber *f = w->cur;
	fail(w, f, "%s", msg);
	f->state = F_DONE;
	yield(w, f);
}

static void *tg_take(worker *w, const fiber *f, unsigned long size, unsigned long align, const char *what) {
	if (align < 16)
		align = 16;
	unsigned long off = (w->tgused + align - 1) & ~(align - 1);
	if (off + size > MTL_TG_LIMIT) {
		fail(w, f, "threadgroup memory exceeds the %d-byte limit: %s needs %lu bytes at offset %lu", MTL_TG_LIMIT,
		     what, size, off);
		return NULL;
	}
	void *p = w->tgmem + off;
	memset(p, 0xff, size); /* poison: NaN as float, half and bfloat; -1 as integers */
	w->tgused = off + size;
	return p;
}

EXPORT void *mtl_rt_tg_alloc(unsigned long size, unsigned long align, const char *fn, int line) {
	worker *w = current("threadgroup allocation");
	fiber *f = w->cur;
	for (int i = 0; i < w->nstatics; i++) {
		static_alloc *a = &w->statics[i];
		if (a->line == line && a->size == size && strcmp(a->fn, fn) == 0)
			return a->p;
	}
	char what[256];
	snprintf(what, sizeof what, "threadgroup variable at line %d in %s", line, fn);
	void *p = w->nstatics < MAX_STATIC_ALLOCS ? tg_take(w, f, size, align, what) : NULL;
	if (!p) {
		if (w->nstatics >= MAX_STATIC_ALLOCS)
			fail(w, f, "more than %d threadgroup variables", MAX_STATIC_ALLOCS);
		f->state = F_DONE;
		yield(w, f);
		__builtin_unreachable();
	}
	w->statics[w->nstatics++] = (static_alloc){fn, line, size, p};
	return p;
}

static void fiber_main(fiber *f) {
	worker *w = tls_worker;
	w->k->launch((void *const *)w->args->buf, w->tgbufs, &f->ti);
	f->state = F_DONE;
	yield(w, f);
	__builtin_trap();
}

/* ---- scheduler ---------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void set3(unsigned *d, unsigned x, unsigned y, unsigned z) {
	d[0] = x;
	d[1] = y;
	d[2] = z;
	d[3] = 0;
}

static const char *state_name(int s) {
	switch (s) {
	case F_BARRIER:
		return "a threadgroup_barrier";
	case F_COLL:
		return "a simd collective";
	case F_DONE:
		return "return";
	}
	return "running";
}

/* resolve_collectives runs every collective whose lanes have all arrived.
 * Returns the number of fibers made runnable, or -1 on error. */
static int resolve_collectives(worker *w, int strict) {
	int woke = 0;
	unsigned n = w->nthreads;
	for (unsigned s0 = 0; s0 < n; s0 += MTL_SIMD_WIDTH) {
		unsigned width = n - s0 < MTL_SIMD_WIDTH ? n - s0 : MTL_SIMD_WIDTH;
		fiber *fs = &w->fibers[s0];
		int any = 0;
		for (unsigned i = 0; i < width; i++)
			any |= fs[i].state == F_COLL;
		if (!any)
			continue;
		if (strict) {
			/* Every lane of the simdgroup must be at the same collective. */
			const fiber *a = NULL;
			for (unsigned i = 0; i < width && !a; i++)
				if (fs[i].state == F_COLL)
					a = &fs[i];
			for (unsigned i = 0; i < width; i++) {
				const fiber *b = &fs[i];
				if (b->state == F_COLL && b->site == a->site)
					continue;
				char who[128];
				thread_str(who, sizeof who, b);
				fail(w, a,
				     "divergent simd collective: this lane waits at a simd_* call that %s is not at "
				     "(it is at %s%s); strict mode requires every lane of the simdgroup to reach the "
				     "same collective",
				     who, state_name(b->state), b->state == F_COLL ? " elsewhere" : "");
				return -1;
			}
		}
		/* Group the waiting lanes by call site; each group runs the op once. */
		unsigned done = 0; /* lanes handled */
		for (unsigned i = 0; i < width; i++) {
			if (fs[i].state != F_COLL || (done >> i & 1))
				continue;
			mtl_coll_lane lanes[MTL_SIMD_WIDTH];
			memset(lanes, 0, sizeof lanes);
			uint64_t st = fs[i].site;
			mtl_coll_fn fn = fs[i].fn;
			for (unsigned j = i; j < width; j++) {
				fiber *g = &fs[j];
				if (g->state != F_COLL || g->site != st || (done >> j & 1))
					continue;
				if (g->fn != fn) {
					fail(w, g, "lanes at one call site run different simd collectives");
					return -1;
				}
				done |= 1u << j;
				lanes[j] = (mtl_coll_lane){g->in, g->out, g->arg, 1};
			}
			unsigned bad = fn(lanes, width);
			if (bad && strict) {
				unsigned j = __builtin_ctz(bad);
				fail(w, &fs[j],
				     "simd shuffle/broadcast read lane %u, which is inactive (it returned, "
				     "diverged or does not exist in a simdgroup of %u threads)",
				     lanes[j].arg, width);
				return -1;
			}
			for (unsigned j = 0; j < width; j++)
				if (lanes[j].active) {
					fs[j].state = F_RUN;
					woke++;
				}
		}
	}
	return woke;
}

static int run_group(worker *w, uint64_t gi, int strict, uint64_t seed) {
	const launch_args *a = w->args;
	unsigned gx = a->groups[0], gy = a->groups[1];
	unsigned tx = a->threads[0], ty = a->threads[1], tz = a->threads[2];
	unsigned n = tx * ty * tz;
	w->group = gi;
	w->tgpos[0] = (unsigned)(gi % gx);
	w->tgpos[1] = (unsigned)(gi / gx % gy);
	w->tgpos[2] = (unsigned)(gi / gx / gy);
	w->nthreads = n;
	w->cur = NULL;
	w->tgused = 0;
	w->nstatics = 0;
	for (int i = 0; i < MTL_MAX_BUFFERS; i++) {
		w->tgbufs[i] = NULL;
		if (a->tglen[i]) {
			char what[64];
			snprintf(what, sizeof what, "[[threadgroup(%d)]]", i);
			w->tgbufs[i] = tg_take(w, NULL, a->tglen[i], 16, what);
			if (!w->tgbufs[i])
				return -1;
		}
	}
	unsigned nsg = (n + MTL_SIMD_WIDTH - 1) / MTL_SIMD_WIDTH;
	for (unsigned i = 0; i < n; i++) {
		fiber *f = &w->fibers[i];
		unsigned x = i % tx, y = i / tx % ty, z = i / tx / ty;
		f->idx = i;
		f->state = F_RUN;
		unsigned(*b)[4] = f->ti.b;
		set3(b[MTL_B_THREAD_POSITION_IN_THREADGROUP], x, y, z);
		set3(b[MTL_B_THREADGROUP_POSITION_IN_GRID], w->tgpos[0], w->tgpos[1], w->tgpos[2]);
		set3(b[MTL_B_THREAD_POSITION_IN_GRID], w->tgpos[0] * tx + x, w->tgpos[1] * ty + y, w->tgpos[2] * tz + z);
		set3(b[MTL_B_THREAD_INDEX_IN_THREADGROUP], i, 0, 0);
		set3(b[MTL_B_THREADS_PER_THREADGROUP], tx, ty, tz);
		set3(b[MTL_B_THREADGROUPS_PER_GRID], a->groups[0], a->groups[1], a->groups[2]);
		set3(b[MTL_B_THREADS_PER_GRID], a->groups[0] * tx, a->groups[1] * ty, a->groups[2] * tz);
		set3(b[MTL_B_SIMDGROUP_INDEX_IN_THREADGROUP], i / MTL_SIMD_WIDTH, 0, 0);
		set3(b[MTL_B_THREAD_INDEX_IN_SIMDGROUP], i % MTL_SIMD_WIDTH, 0, 0);
		set3(b[MTL_B_SIMDGROUPS_PER_THREADGROUP], nsg, 0, 0);
		set3(b[MTL_B_THREADS_PER_SIMDGROUP], MTL_SIMD_WIDTH, 0, 0);
		set3(b[MTL_B_QUADGROUP_INDEX_IN_THREADGROUP], i / 4, 0, 0);
		set3(b[MTL_B_THREAD_INDEX_IN_QUADGROUP], i % 4, 0, 0);
		set3(b[MTL_B_QUADGROUPS_PER_THREADGROUP], (n + 3) / 4, 0, 0);
		set3(b[MTL_B_GRID_ORIGIN], 0, 0, 0);
		f->sp = fiber_frame(f->stack_hi, fiber_main, f);
	}
	for (uint64_t round = 0;; round++) {
		unsigned *order = w->order;
		for (unsigned i = 0; i < n; i++)
			order[i] = i;
		if (seed) {
			uint64_t r = mix64(seed ^ mix64(gi ^ mix64(round)));
			for (unsigned i = n; i > 1; i--) {
				r = mix64(r);
				unsigned j = (unsigned)(r % i), t = order[i - 1];
				order[i - 1] = order[j];
				order[j] = t;
			}
		}
		for (unsigned k = 0; k < n; k++) {
			fiber *f = &w->fibers[order[k]];
			if (f->state != F_RUN)
				continue;
			w->cur = f;
			mtl_switch(&w->sched_sp, f->sp);
			w->cur = NULL;
			if (w->failed)
				return -1;
		}
		int woke = resolve_collectives(w, strict);
		if (woke < 0)
			return -1;
		if (woke > 0)
			continue;
		fiber *first = NULL, *done = NULL;
		unsigned nbar = 0;
		for (unsigned i = 0; i < n; i++) {
			fiber *f = &w->fibers[i];
			if (f->state == F_BARRIER) {
				nbar++;
				if (!first)
					first = f;
			} else if (f->state == F_DONE && !done)
				done = f;
		}
		if (nbar == 0)
			return 0; /* every thread returned */
		if (strict || done) {
			for (unsigned i = 0; i < n; i++) {
				fiber *f = &w->fibers[i];
				if (f->state == F_BARRIER && f->site == first->site)
					continue;
				if (f->state == F_DONE && !strict)
					continue;
				char who[128];
				thread_str(who, sizeof who, f);
				fail(w, first,
				     "divergent threadgroup_barrier: %u of %u threads wait at this barrier while %s is at %s%s",
				     nbar, n, who, state_name(f->state), f->state == F_BARRIER ? " elsewhere" : "");
				return -1;
			}
		}
		for (unsigned i = 0; i < n; i++)
			if (w->fibers[i].state == F_BARRIER)
				w->fibers[i].state = F_RUN;
	}
}

/* ---- faults --------------------------------------------------------------- */

static const int fault_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};
#define NSIGS (int)(sizeof fault_sigs / sizeof fault_sigs[0])
static struct sigaction old_actions[NSIGS];
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;

static void on_fault(int sig, siginfo_t *info, void *uctx) {
	worker *w = tls_worker;
	if (w && w->in_launch) {
		w->fault_addr = (uintptr_t)info->si_addr;
		w->fault_sig = sig;
		siglongjmp(w->jb, 1);
	}
	for (int i = 0; i < NSIGS; i++) {
		if (fault_sigs[i] != sig)
			continue;
		struct sigaction *o = &old_actions[i];
		if (o->sa_flags & SA_SIGINFO) {
			o->sa_sigaction(sig, info, uctx);
			return;
		}
		if (o->sa_handler == SIG_DFL || o->sa_handler == SIG_IGN) {
			signal(sig, SIG_DFL); /* re-executes the faulting instruction: default action */
			return;
		}
		o->sa_handler(sig);
		return;
	}
}

static void install_handlers(void) {
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	for (int i = 0; i < NSIGS; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(fault_sigs[i], &sa, &old_actions[i]);
	}
}

static void describe_fault(worker *w) {
	const launch_args *a = w->args;
	uintptr_t addr = w->fault_addr;
	const fiber *f = w->cur;
	const char *what = "fault";
	switch (w->fault_sig) {
	case SIGSEGV:
		what = "SIGSEGV";
		break;
	case SIGBUS:
		what = "SIGBUS";
		break;
	case SIGFPE:
		fail(w, f, "SIGFPE (integer division by zero?)");
		return;
	case SIGILL:
	case SIGTRAP:
		fail(w, f, "trap (%s): undefined behaviour reached (e.g. falling off a non-void function)",
		     w->fault_sig == SIGILL ? "SIGILL" : "SIGTRAP");
		return;
	}
	for (int i = 0; i < MTL_MAX_BUFFERS; i++) {
		uintptr_t b = (uintptr_t)a->buf[i];
		if (!b)
			continue;
		uintptr_t end = b + a->buflen[i];
		if (addr >= end && addr < end + 4 * page_size) {
			fail(w, f, "%s: access past the end of [[buffer(%d)]] at byte %lu (%lu bytes bound)", what, i,
			     (unsigned long)(addr - b), (unsigned long)a->buflen[i]);
			return;
		}
	}
	for (unsigned i = 0; i < w->nstacks; i++) {
		const fiber *g = &w->fibers[i];
		if (addr >= (uintptr_t)g->stack_lo - GUARD_SIZE && addr < (uintptr_t)g->stack_lo) {
			fail(w, f, "%s: stack overflow (%d KiB per thread)", what, STACK_SIZE >> 10);
			return;
		}
	}
	fail(w, f, "%s at address %#lx (not next to a bound buffer)", what, (unsigned long)addr);
}

/* ---- exported API ---------------------------------------------------------- */

EXPORT int ingot_msl_abi(void) { return MTL_ABI_VERSION; }
EXPORT int ingot_msl_nkernels(void) { return mtl_nkernels; }
EXPORT const char *ingot_msl_kernel_name(int i) { return mtl_kernels[i].name; }
EXPORT const char *ingot_msl_kernel_params(int i) { return mtl_kernels[i].params; }
EXPORT const char *ingot_msl_kernel_where(int i) { return mtl_kernels[i].where; }

/* ingot_msl_launch runs threadgroups [group_begin, group_end) of one dispatch.
 * It returns 0, or 1 with args->err and args->err_group set. */
EXPORT int ingot_msl_launch(launch_args *a) {
	pthread_once(&handler_once, install_handlers);
	a->err[0] = 0;
	if (a->kernel >= (uint64_t)mtl_nkernels) {
		snprintf(a->err, sizeof a->err, "kernel index %lu out of range", (unsigned long)a->kernel);
		return 1;
	}
	uint64_t n = (uint64_t)a->threads[0] * a->threads[1] * a->threads[2];
	if (n == 0 || n > MTL_MAX_THREADS) {
		snprintf(a->err, sizeof a->err, "%s: %lu threads per threadgroup (must be 1..%d)",
			 mtl_kernels[a->kernel].name, (unsigned long)n, MTL_MAX_THREADS);
		return 1;
	}
	worker *w = worker_get();
	if (!w || ensure_stacks(w, (unsigned)n) != 0) {
		snprintf(a->err, sizeof a->err, "out of memory for fiber stacks");
		if (w)
			worker_put(w);
		return 1;
	}
	w->args = a;
	w->k = &mtl_kernels[a->kernel];
	w->err = a->err;
	w->errlen = sizeof a->err;
	w->failed = 0;
	w->cur = NULL;
	int strict = a->flags & 1;
	int rc = 0;
	/* An alternate signal stack is needed to report stack overflows; Go gives
	 * every thread one, but make sure. */
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_DISABLE)) {
		static __thread char *alt;
		if (!alt)
			alt = malloc(64 << 10);
		if (alt) {
			stack_t ns = {.ss_sp = alt, .ss_size = 64 << 10, .ss_flags = 0};
			sigaltstack(&ns, NULL);
		}
	}
	tls_worker = w;
	volatile uint64_t gi = a->group_begin;
	if (sigsetjmp(w->jb, 1) != 0) {
		w->in_launch = 0;
		describe_fault(w);
		a->err_group = gi;
		rc = 1;
	} else {
		w->in_launch = 1;
		for (; gi < a->group_end; gi++) {
			if (run_group(w, gi, strict, a->seed) != 0) {
				a->err_group = gi;
				rc = 1;
				break;
			}
		}
		w->in_launch = 0;
	}
	tls_worker = NULL;
	worker_put(w);
	return rc;
}

/* ---- soft-float conversions -------------------------------------------------
 * Our own half and bfloat conversions (round to nearest even), so results do
 * not depend on the libgcc version (libgcc 12 has no __truncsfbf2). */

static uint16_t f32_to_f16(uint32_t x) {
	uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
	if (e == 0xff)
		return sign | 0x7c00 | (m ? 0x200 | (m >> 13) : 0);
	int32_t he = (int32_t)e - 127 + 15;
	if (he >= 31)
		return sign | 0x7c00;
	if (he <= 0) {
		if (he < -10)
			return sign;
		m |= 0x800000;
		uint32_t shift = (uint32_t)(14 - he);
		uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return sign | r;
	}
	uint32_t r = ((uint32_t)he << 10) | (m >> 13), rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++; /* may carry into the exponent, up to infinity: correct */
	return sign | r;
}

static uint32_t f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0x1f)
		return sign | 0x7f800000 | (m << 13);
	if (e == 0) {
		if (!m)
			return sign;
		e = 1;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		m &= 0x3ff;
		return sign | ((e + 127 - 15) << 23) | (m << 13);
	}
	return sign | ((e + 127 - 15) << 23) | (m << 13);
}

static uint16_t f32_to_bf16(uint32_t x) {
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#define BITS(T, U, v) (__extension__({ union { T a; U b; } u_; u_.a = (v); u_.b; }))

_Float16 __truncsfhf2(float f) { return BITS(uint16_t, _Float16, f32_to_f16(BITS(float, uint32_t, f))); }
float __extendhfsf2(_Float16 h) { return BITS(uint32_t, float, f16_to_f32(BITS(_Float16, uint16_t, h))); }
_Float16 __truncdfhf2(double d) { return __truncsfhf2((float)d); /* double rounding: Metal has no double */ }
__bf16 __truncsfbf2(float f) { return BITS(uint16_t, __bf16, f32_to_bf16(BITS(float, uint32_t, f))); }
