/*
 * msl_runtime.h: the ABI between the compat <metal_stdlib> (kernel translation
 * units, OpenCL C++ mode), the generated launchers and the fiber runtime
 * (runtime.c, C11). Part of ingot's MSL interpreter (internal/msl).
 *
 * Pointers here are plain (generic) pointers; kernel code converts its
 * address-space-qualified pointers through uintptr when it must.
 */
#ifndef INGOT_MSL_RUNTIME_H
#define INGOT_MSL_RUNTIME_H

#define MTL_ABI_VERSION 1
#define MTL_SIMD_WIDTH 32
#define MTL_MAX_BUFFERS 31
#define MTL_TG_LIMIT 32768
#define MTL_MAX_THREADS 1024

/* Builtin indices: mtl_thread_info.b[MTL_B_x] holds the builtin as (x, y, z, 0). */
enum {
	MTL_B_THREAD_POSITION_IN_GRID,
	MTL_B_THREAD_POSITION_IN_THREADGROUP,
	MTL_B_THREAD_INDEX_IN_THREADGROUP,
	MTL_B_THREADGROUP_POSITION_IN_GRID,
	MTL_B_THREADS_PER_THREADGROUP,
	MTL_B_THREADGROUPS_PER_GRID,
	MTL_B_THREADS_PER_GRID,
	MTL_B_SIMDGROUP_INDEX_IN_THREADGROUP,
	MTL_B_THREAD_INDEX_IN_SIMDGROUP,
	MTL_B_SIMDGROUPS_PER_THREADGROUP,
	MTL_B_THREADS_PER_SIMDGROUP,
	MTL_B_QUADGROUP_INDEX_IN_THREADGROUP,
	MTL_B_THREAD_INDEX_IN_QUADGROUP,
	MTL_B_QUADGROUPS_PER_THREADGROUP,
	MTL_B_GRID_ORIGIN,
	MTL_B_COUNT
};

typedef struct mtl_thread_info {
	unsigned b[MTL_B_COUNT][4];
} mtl_thread_info;

/* One lane of a SIMD-group collective, as the runtime hands it to the op. */
typedef struct mtl_coll_lane {
	const void *in; /* this lane's operand */
	void *out;      /* where this lane's result goes */
	unsigned arg;   /* op argument (source lane for gathers); on error, the offending source lane */
	int active;     /* lane takes part */
} mtl_coll_lane;

/* A collective op: reads lanes[i].in of active lanes, writes lanes[i].out.
 * It returns a mask of active lanes that read an inactive or missing lane
 * (their results are poisoned); width is the number of threads in the simdgroup. */
typedef unsigned (*mtl_coll_fn)(mtl_coll_lane *lanes, unsigned width);

/* A generated launcher: binds [[buffer]], [[threadgroup]] and builtins and calls the kernel. */
typedef void (*mtl_launch_fn)(void *const *bufs, void *const *tgbufs, const mtl_thread_info *ti);

typedef struct mtl_kernel_desc {
	const char *name;   /* host name */
	const char *params; /* "buffer:0 threadgroup:0 thread_position_in_grid ..." */
	const char *where;  /* file:line of the definition */
	mtl_launch_fn launch;
} mtl_kernel_desc;

#ifdef __cplusplus
extern "C" {
#endif
/* Called by kernel code on the current fiber. */
void mtl_rt_barrier(void);
void mtl_rt_collective(mtl_coll_fn fn, const void *in, void *out, unsigned arg);
void *mtl_rt_tg_alloc(unsigned long size, unsigned long align, const char *fn, int line);
unsigned mtl_rt_lane(void);
void mtl_rt_fail(const char *msg);
#ifdef __cplusplus
}
#endif

#endif
