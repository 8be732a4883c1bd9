
// ---- PTX runtime: barriers, SIMD-group collectives, simdgroup_matrix ----------------------
// (rt/ptx/runtime.h) A simdgroup is a warp: lane = %laneid, simdgroup =
// linear thread index / 32. Reductions, shuffles and matrices use the warp's
// existing lanes as the member mask (all 32 unless the threadgroup is not a
// multiple of 32), so, as on Metal and in the strict interpreter, every lane
// must reach every collective (rule 3 of internal/msl/README.md). Votes
// (simd_ballot, simd_all, simd_any, simd_active_threads_mask, simd_is_first,
// simd_broadcast_first) use the active mask, so they work in divergent code.
// (Still inside the interpreter math section's namespace metal.)
enum class mem_flags : uint {
	mem_none = 0,
	mem_device = 1,
	mem_threadgroup = 2,
	mem_texture = 4,
	mem_threadgroup_imageblock = 8,
	mem_object_data = 16,
};
__MTL mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((uint)a | (uint)b); }
enum thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };

// bar.sync 0 also orders device memory among the threadgroup's threads.
__MTL void threadgroup_barrier(mem_flags) { __nvvm_bar_sync(0); }
__MTL void atomic_thread_fence(mem_flags f, ...) {
	if ((uint)f & (uint)mem_flags::mem_device)
		__nvvm_membar_gl();
	else
		__nvvm_membar_cta();
}

#define MTL_SIMD_WIDTH 32u
__MTL uint __ptx_linear_tid() {
	return __nvvm_read_ptx_sreg_tid_x() +
	       __nvvm_read_ptx_sreg_ntid_x() * (__nvvm_read_ptx_sreg_tid_y() + __nvvm_read_ptx_sreg_ntid_y() * __nvvm_read_ptx_sreg_tid_z());
}
__MTL uint __ptx_nthreads() {
	return __nvvm_read_ptx_sreg_ntid_x() * __nvvm_read_ptx_sreg_ntid_y() * __nvvm_read_ptx_sreg_ntid_z();
}
__MTL uint __ptx_lane() { return __nvvm_read_ptx_sreg_laneid(); }
// __ptx_nlanes is the number of lanes in this warp (32 but in a threadgroup's
// last, partial warp); __ptx_members their mask.
__MTL uint __ptx_nlanes() {
	uint rest = __ptx_nthreads() - (__ptx_linear_tid() & ~31u);
	return rest < 32u ? rest : 32u;
}
__MTL uint __ptx_members() {
	uint n = __ptx_nlanes();
	return n == 32u ? ~0u : (1u << n) - 1u;
}

// __shfl moves any trivially copyable T, a 32-bit word at a time.
enum __shfl_mode { __shfl_idx, __shfl_up, __shfl_down, __shfl_bfly };
template <__shfl_mode M, class T> __MTL T __shfl(uint mask, T x, uint b) {
	constexpr int N = (sizeof(T) + 3) / 4;
	uint w[N];
	w[N - 1] = 0;
	__builtin_memcpy(w, &x, sizeof(T));
	for (int i = 0; i < N; i++) {
		int v = (int)w[i];
		if (M == __shfl_idx)
			v = __nvvm_shfl_sync_idx_i32(mask, v, b, 0x1f);
		else if (M == __shfl_up)
			v = __nvvm_shfl_sync_up_i32(mask, v, b, 0);
		else if (M == __shfl_down)
			v = __nvvm_shfl_sync_down_i32(mask, v, b, 0x1f);
		else
			v = __nvvm_shfl_sync_bfly_i32(mask, v, b, 0x1f);
		w[i] = (uint)v;
	}
	T r;
	__builtin_memcpy(&r, w, sizeof(T));
	return r;
}

struct __op_sum {
	template <class T> __MTL T operator()(T a, T b) const { return a + b; }
	template <class T> static __MTL T identity() { return (T)0; }
};
struct __op_product {
	template <class T> __MTL T operator()(T a, T b) const { return a * b; }
	template <class T> static __MTL T identity() { return (T)1; }
};
struct __op_max {
	template <class T> __MTL T operator()(T a, T b) const { return max(a, b); }
};
struct __op_min {
	template <class T> __MTL T operator()(T a, T b) const { return min(a, b); }
};
struct __op_and {
	template <class T> __MTL T operator()(T a, T b) const { return a & b; }
};
struct __op_or {
	template <class T> __MTL T operator()(T a, T b) const { return a | b; }
};
struct __op_xor {
	template <class T> __MTL T operator()(T a, T b) const { return a ^ b; }
};

// __reduce combines the lanes of each group of G in the interpreter's fixed
// pairwise tree (lane 0+1, 2+3, …, then pairs of pairs): a butterfly whose
// every step puts the lower lane's operand first, so each lane of a full
// group ends with exactly the tree's result; a partial warp takes lane 0's.
template <class T, class Op, uint G> __MTL T __reduce(T x) {
	uint mask = __ptx_members(), n = __ptx_nlanes(), lane = __ptx_lane();
	for (uint s = 1; s < G; s *= 2) {
		T y = __shfl<__shfl_bfly>(mask, x, s);
		if ((lane ^ s) < n)
			x = (lane & s) ? Op()(y, x) : Op()(x, y);
	}
	if (n < 32u)
		x = __shfl<__shfl_idx>(mask, x, G == 32u ? 0u : lane & ~(G - 1));
	return x;
}
#define __MTL_REDUCE(name, op, G)                                                                   \
	template <class T> __MTL T name(T x) { return __reduce<T, op, G>(x); }
__MTL_REDUCE(simd_sum, __op_sum, 32u)
__MTL_REDUCE(simd_product, __op_product, 32u)
__MTL_REDUCE(simd_max, __op_max, 32u)
__MTL_REDUCE(simd_min, __op_min, 32u)
__MTL_REDUCE(simd_and, __op_and, 32u)
__MTL_REDUCE(simd_or, __op_or, 32u)
__MTL_REDUCE(simd_xor, __op_xor, 32u)
__MTL_REDUCE(quad_sum, __op_sum, 4u)
__MTL_REDUCE(quad_product, __op_product, 4u)
__MTL_REDUCE(quad_max, __op_max, 4u)
__MTL_REDUCE(quad_min, __op_min, 4u)
__MTL_REDUCE(quad_and, __op_and, 4u)
__MTL_REDUCE(quad_or, __op_or, 4u)
__MTL_REDUCE(quad_xor, __op_xor, 4u)
#undef __MTL_REDUCE

// Prefix scans in lane order, as the interpreter folds them: a serial chain
// for floating point (31 shuffles: the sums' rounding matches), a log-step
// scan for integers (the order does not change the result).
template <class T, class Op> __MTL T __scan_incl(T x) {
	uint mask = __ptx_members(), n = __ptx_nlanes(), lane = __ptx_lane();
	T acc = x;
	if constexpr (is_integral_v<__elem_t<T>>) {
		for (uint s = 1; s < 32u; s *= 2) {
			T y = __shfl<__shfl_up>(mask, acc, s);
			if (lane >= s)
				acc = Op()(y, acc);
		}
	} else {
		for (uint k = 1; k < n; k++) {
			T y = __shfl<__shfl_up>(mask, acc, 1);
			if (lane == k)
				acc = Op()(y, acc);
		}
	}
	return acc;
}
template <class T, class Op> __MTL T __scan_excl(T x) {
	T incl = __scan_incl<T, Op>(x);
	T y = __shfl<__shfl_up>(__ptx_members(), incl, 1);
	return __ptx_lane() == 0 ? Op::template identity<T>() : y;
}
template <class T> __MTL T simd_prefix_inclusive_sum(T x) { return __scan_incl<T, __op_sum>(x); }
template <class T> __MTL T simd_prefix_exclusive_sum(T x) { return __scan_excl<T, __op_sum>(x); }
template <class T> __MTL T simd_prefix_inclusive_product(T x) { return __scan_incl<T, __op_product>(x); }
template <class T> __MTL T simd_prefix_exclusive_product(T x) { return __scan_excl<T, __op_product>(x); }

// Shuffles. Lanes whose source is past the simdgroup (shuffle_down/up) keep
// their own value, as on Metal (PTX's clamp does exactly that).
template <class T> __MTL T simd_shuffle(T x, ushort lane) { return __shfl<__shfl_idx>(__ptx_members(), x, lane); }
template <class T> __MTL T simd_broadcast(T x, ushort lane) { return __shfl<__shfl_idx>(__ptx_members(), x, lane); }
template <class T> __MTL T simd_shuffle_xor(T x, ushort mask) {
	return __shfl<__shfl_idx>(__ptx_members(), x, (__ptx_lane() ^ mask) & 31u);
}
template <class T> __MTL T simd_shuffle_down(T x, ushort delta) { return __shfl<__shfl_down>(__ptx_members(), x, delta); }
template <class T> __MTL T simd_shuffle_up(T x, ushort delta) { return __shfl<__shfl_up>(__ptx_members(), x, delta); }
template <class T> __MTL T simd_shuffle_rotate_down(T x, ushort delta) {
	return __shfl<__shfl_idx>(__ptx_members(), x, (__ptx_lane() + delta) % 32u);
}
template <class T> __MTL T simd_shuffle_rotate_up(T x, ushort delta) {
	return __shfl<__shfl_idx>(__ptx_members(), x, (__ptx_lane() + 32u - delta % 32u) % 32u);
}
template <class T> __MTL T quad_shuffle(T x, ushort qlane) {
	return __shfl<__shfl_idx>(__ptx_members(), x, (__ptx_lane() & ~3u) | (qlane & 3u));
}
template <class T> __MTL T quad_broadcast(T x, ushort qlane) { return quad_shuffle(x, qlane); }
template <class T> __MTL T quad_shuffle_xor(T x, ushort mask) {
	uint l = __ptx_lane();
	return __shfl<__shfl_idx>(__ptx_members(), x, (l & ~3u) | ((l ^ mask) & 3u));
}
template <class T> __MTL T quad_shuffle_down(T x, ushort delta) {
	uint l = __ptx_lane();
	return __shfl<__shfl_idx>(__ptx_members(), x, (l & 3u) + delta < 4u ? l + delta : l);
}
template <class T> __MTL T quad_shuffle_up(T x, ushort delta) {
	uint l = __ptx_lane();
	return __shfl<__shfl_idx>(__ptx_members(), x, (l & 3u) >= delta ? l - delta : l);
}

// Votes over the active lanes.
__MTL uint __ptx_active() { return __nvvm_activemask(); }
template <class T> __MTL T simd_broadcast_first(T x) {
	uint m = __ptx_active();
	return __shfl<__shfl_idx>(m, x, __builtin_ctz(m));
}
struct simd_vote {
	typedef ulong vote_t;
	vote_t v;
	__MTL explicit operator vote_t() const { return v; }
	__MTL bool all() const { return v == __all; }
	__MTL bool any() const { return v != 0; }
	vote_t __all;
};
__MTL simd_vote simd_ballot(bool b) {
	uint m = __ptx_active();
	simd_vote r;
	r.v = __nvvm_vote_ballot_sync(m, b);
	r.__all = m;
	return r;
}
__MTL simd_vote simd_active_threads_mask() {
	simd_vote r;
	r.v = r.__all = __ptx_active();
	return r;
}
__MTL bool simd_all(bool b) { return __nvvm_vote_all_sync(__ptx_active(), b); }
__MTL bool simd_any(bool b) { return __nvvm_vote_any_sync(__ptx_active(), b); }
__MTL bool simd_is_first() { return (uint)__builtin_ctz(__ptx_active()) == __ptx_lane(); }
__MTL void simdgroup_barrier(mem_flags) { __nvvm_bar_warp_sync(__ptx_members()); }

// ---- simdgroup_matrix 8x8 --------------------------------------------------------------
// The interpreter's lane layout: lane l holds row ((l/4)/4)*4 + (l/2)%4 and
// columns c, c+1 with c = ((l/4)&2)*2 + (l%2)*2. Multiplies move operands with
// shfl.sync (24 per 8×8×8 step) and accumulate in float in k order, as the
// interpreter does; they do not use tensor cores. All 32 lanes must take part.
__MTL void __sg_pos(uint lane, thread uint &row, thread uint &col) {
	uint q = lane / 4;
	row = (q / 4) * 4 + (lane / 2) % 4;
	col = (q & 2) * 2 + (lane % 2) * 2;
}
// __sg_lane is the lane holding (row, col) (col even): the inverse of __sg_pos.
__MTL uint __sg_lane(uint row, uint col) {
	return ((row & 4u) << 2) | ((col & 4u) << 1) | ((row & 3u) << 1) | ((col >> 1) & 1u);
}

template <class T, int Rows, int Cols> struct simdgroup_matrix {
	static_assert(Rows == 8 && Cols == 8, "simdgroup_matrix: only 8x8 is supported");
	__mtl_vec<T, 2> __e;
	__MTL simdgroup_matrix() = default;
	__MTL explicit simdgroup_matrix(T dval) {
		uint r, c;
		__sg_pos(__ptx_lane(), r, c);
		__e[0] = r == c ? dval : (T)0;
		__e[1] = r == c + 1 ? dval : (T)0;
	}
	__MTL thread __mtl_vec<T, 2> &thread_elements() { return __e; }
	__MTL __mtl_vec<T, 2> thread_elements() const { return __e; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <class T, int R, int C> __MTL simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
	simdgroup_matrix<T, R, C> m;
	m.__e = (__mtl_vec<T, 2>)v;
	return m;
}

template <class T, class P>
__MTL void simdgroup_load(thread simdgroup_matrix<T, 8, 8> &d, P src, ulong elements_per_row = 8,
			  ulong2 matrix_origin = ulong2(0, 0), bool transpose_matrix = false) {
	uint r, c;
	__sg_pos(__ptx_lane(), r, c);
	for (uint i = 0; i < 2; i++) {
		ulong rr = transpose_matrix ? c + i : r, cc = transpose_matrix ? r : c + i;
		d.__e[i] = (T)src[(matrix_origin.y + rr) * elements_per_row + matrix_origin.x + cc];
	}
}
template <class T, class P>
__MTL void simdgroup_store(simdgroup_matrix<T, 8, 8> a, P dst, ulong elements_per_row = 8,
			   ulong2 matrix_origin = ulong2(0, 0), bool transpose_matrix = false) {
	uint r, c;
	__sg_pos(__ptx_lane(), r, c);
	for (uint i = 0; i < 2; i++) {
		ulong rr = transpose_matrix ? c + i : r, cc = transpose_matrix ? r : c + i;
		dst[(matrix_origin.y + rr) * elements_per_row + matrix_origin.x + cc] = a.__e[i];
	}
}

template <class TD, class TA, class TB, class TC>
__MTL void simdgroup_multiply_accumulate(thread simdgroup_matrix<TD, 8, 8> &d, simdgroup_matrix<TA, 8, 8> a,
					 simdgroup_matrix<TB, 8, 8> b, simdgroup_matrix<TC, 8, 8> c) {
#pragma clang fp contract(off)
	uint r, col;
	__sg_pos(__ptx_lane(), r, col);
	const uint m = ~0u;
	float a0 = (float)a.__e[0], a1 = (float)a.__e[1], b0 = (float)b.__e[0], b1 = (float)b.__e[1];
	float ar[8]; // row r of A
	for (uint cp = 0; cp < 4; cp++) {
		uint src = __sg_lane(r, 2 * cp);
		ar[2 * cp] = __shfl<__shfl_idx>(m, a0, src);
		ar[2 * cp + 1] = __shfl<__shfl_idx>(m, a1, src);
	}
	float acc0 = (float)c.__e[0], acc1 = (float)c.__e[1];
	for (uint j = 0; j < 8; j++) { // B[j][col], B[j][col+1]
		uint src = __sg_lane(j, col);
		float bj0 = __shfl<__shfl_idx>(m, b0, src), bj1 = __shfl<__shfl_idx>(m, b1, src);
		acc0 += ar[j] * bj0;
		acc1 += ar[j] * bj1;
	}
	d.__e[0] = (TD)acc0;
	d.__e[1] = (TD)acc1;
}
template <class TD, class TA, class TB>
__MTL void simdgroup_multiply(thread simdgroup_matrix<TD, 8, 8> &d, simdgroup_matrix<TA, 8, 8> a,
			      simdgroup_matrix<TB, 8, 8> b) {
	simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<TD, 8, 8>((TD)0));
}

