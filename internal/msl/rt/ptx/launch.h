
// ---- threadgroup variables (rt/ptx/launch.h) -------------------------------------------------
// OpenCL allows no __local variable outside a kernel function, and a Metal
// kernel is not the PTX entry, so function-scope threadgroup arrays have no
// home here: pass a [[threadgroup(i)]] buffer instead.
__MTL void *__mtl_tg_alloc(unsigned long, unsigned long, __UINTPTR_TYPE__, int)
	__attribute__((unavailable("function-scope threadgroup arrays are not supported by the PTX generator: "
				   "pass threadgroup memory as a [[threadgroup(i)]] kernel parameter")));
} // namespace metal

// ---- entry points ---------------------------------------------------------------------------
// The generator emits one `.entry` per host name, named with an asm label. Its
// parameters are each [[buffer(i)]] in index order, then one byte offset into
// the dynamic shared memory per [[threadgroup(i)]] in index order:
//   device/constant T *   → .param .u64, a device pointer
//   constant T &          → .param .align A .b8 [sizeof T], T by value (setBytes)
//   threadgroup T *       → .param .u32, the offset (the host sums the
//                           lengths into the launch's sharedMemBytes)
// Builtins are read from the PTX special registers.
__asm__(".extern .shared .align 16 .b8 __ingot_smem[];");

namespace __ingot_ptx {
__MTL __local char *smem() {
	unsigned long p;
	__asm__("mov.u64 %0, __ingot_smem;" : "=l"(p));
	return (__local char *)p;
}

template <class T> struct rmas {
	typedef T type;
};
template <class T> struct rmas<__global T> {
	typedef T type;
};
template <class T> struct rmas<__constant T> {
	typedef T type;
};
template <class T> struct rmas<__local T> {
	typedef T type;
};
template <class T> struct rmas<__private T> {
	typedef T type;
};
template <class T> struct rmas<__generic T> {
	typedef T type;
};

template <class F> struct sig;
template <class R, class... P> struct sig<R(P...)> {
	template <int I> using arg = __type_pack_element<I, P...>;
};
// arg_t is the type of parameter I of the kernel whose function type is F.
template <class F, int I> using arg_t = typename sig<F>::template arg<I>;

// val wraps every by-value argument, so all of them are .b8 arrays in the PTX
// and the generator tells them from pointers.
template <class T> struct val {
	T v;
};
template <class P> struct param;
template <class T> struct param<T &> {
	typedef val<metal::remove_cv_t<typename rmas<T>::type>> type;
	static_assert(sizeof(type) > 0, "complete before it is a kernel parameter");
};
template <class T> struct param<T *> {
	typedef __global typename rmas<T>::type *type;
};
template <class F, int I> using param_t = typename param<arg_t<F, I>>::type;

template <class T> __MTL thread T &pass(thread val<T> &v) { return v.v; }
template <class T> __MTL __global T *pass(__global T *p) { return p; }

// builtin<V, B>() is Metal builtin B (the interpreter's MTL_B_* numbering) as V.
template <int B> __MTL void bvals(thread uint *v) {
	uint tx = __nvvm_read_ptx_sreg_tid_x(), ty = __nvvm_read_ptx_sreg_tid_y(), tz = __nvvm_read_ptx_sreg_tid_z();
	uint nx = __nvvm_read_ptx_sreg_ntid_x(), ny = __nvvm_read_ptx_sreg_ntid_y(), nz = __nvvm_read_ptx_sreg_ntid_z();
	uint cx = __nvvm_read_ptx_sreg_ctaid_x(), cy = __nvvm_read_ptx_sreg_ctaid_y(), cz = __nvvm_read_ptx_sreg_ctaid_z();
	uint gx = __nvvm_read_ptx_sreg_nctaid_x(), gy = __nvvm_read_ptx_sreg_nctaid_y(), gz = __nvvm_read_ptx_sreg_nctaid_z();
	uint lin = tx + nx * (ty + ny * tz), n = nx * ny * nz;
	v[1] = v[2] = 0;
	switch (B) {
	case 0: // thread_position_in_grid
		v[0] = cx * nx + tx, v[1] = cy * ny + ty, v[2] = cz * nz + tz;
		break;
	case 1: // thread_position_in_threadgroup
		v[0] = tx, v[1] = ty, v[2] = tz;
		break;
	case 2: // thread_index_in_threadgroup
		v[0] = lin;
		break;
	case 3: // threadgroup_position_in_grid
		v[0] = cx, v[1] = cy, v[2] = cz;
		break;
	case 4: // threads_per_threadgroup
		v[0] = nx, v[1] = ny, v[2] = nz;
		break;
	case 5: // threadgroups_per_grid
		v[0] = gx, v[1] = gy, v[2] = gz;
		break;
	case 6: // threads_per_grid
		v[0] = gx * nx, v[1] = gy * ny, v[2] = gz * nz;
		break;
	case 7: // simdgroup_index_in_threadgroup
		v[0] = lin / 32u;
		break;
	case 8: // thread_index_in_simdgroup
		v[0] = __nvvm_read_ptx_sreg_laneid();
		break;
	case 9: // simdgroups_per_threadgroup
		v[0] = (n + 31u) / 32u;
		break;
	case 10: // threads_per_simdgroup
		v[0] = 32u;
		break;
	case 11: // quadgroup_index_in_threadgroup
		v[0] = lin / 4u;
		break;
	case 12: // thread_index_in_quadgroup
		v[0] = lin % 4u;
		break;
	case 13: // quadgroups_per_threadgroup
		v[0] = (n + 3u) / 4u;
		break;
	default: // grid_origin
		v[0] = 0;
	}
}
template <class P, int B> __MTL P builtin() {
	typedef metal::remove_cv_t<metal::remove_reference_t<P>> V;
	uint v[3];
	bvals<B>(v);
	if constexpr (metal::__is_vec<V>) {
		V r;
		for (int i = 0; i < metal::__vn<V>; i++)
			r[i] = (metal::__elem_t<V>)v[i];
		return r;
	} else
		return (V)v[0];
}
} // namespace __ingot_ptx

#endif
