#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate), row-major with leading
// dimensions lda, ldb, ldc and element offsets into each buffer.
//   A holds [M, K] (row i at a_off + i*lda), or [K, M] when ta != 0.
//   B holds [K, N] (row p at b_off + p*ldb), or [N, K] when tb != 0.
//
// Tiling: a workgroup of 16×16 threads computes a BM×BN = 128×64 tile of C,
// walking K in BK = 16 slices staged through shared memory as vec4 rows.
// Thread (tx, ty) owns an 8×4 micro-tile: rows 4·ty + i and 64 + 4·ty + i
// (i < 4), columns 4·tx + j (j < 4), so that each step of the inner loop
// reads two vec4 of A and one vec4 of B from shared memory for 32 FMAs.
// The next slice is loaded from global memory into registers while the
// current one is multiplied (one tile of shared memory, two barriers per
// slice). Loads outside the matrix read zero, stores outside it are skipped:
// any M, N, K, offsets and leading dimensions are correct.
//
// Summation: each BK-slice of K is summed on its own (an FMA chain of 16 from
// zero) and then added to the running total, so the rounding error grows like
// that of a blocked sum (as the CPU engine's) rather than a K-long chain.
//
// Split-K: workgroup z covers k in [z·k_chunk, min(k, (z+1)·k_chunk)) and
// writes its output at c_off + z·c_stride + row·ldc + col. A product that is
// not split runs with one z and k_chunk = k. A split product (src/vk/ops.rs,
// `gemm_split`) writes S partial planes into a scratch buffer with k_chunk a
// multiple of BK, and gemm_splitk_reduce.comp adds them in a fixed order.
//
// The push-constant block is 16 × u32 = 64 bytes (src/vk/ops.rs asserts it).
//
// ROUND_F16: round every staged input to f16 precision (the f16 precision of
// the ladder on devices without cooperative matrices); accumulation stays f32.
// The rounding is done on the bits (to nearest, ties to even, at f16's 10
// mantissa bits): NVIDIA's driver was seen to drop both float(float16_t(v))
// and unpackHalf2x16(packHalf2x16(v)) round trips, leaving inputs unrounded.
// f16's exponent range is not modelled (no overflow to Inf, no f16
// subnormals); for the rung's unit-normal inputs that changes nothing visible.
#extension GL_EXT_control_flow_attributes : require
#ifdef ROUND_F16
float round_f16_mantissa(float v) {
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return v; // Inf and NaN stay
    u += 0x0fffu + ((u >> 13) & 1u);
    return uintBitsToFloat(u & 0xffffe000u);
}
#define STAGE(v) round_f16_mantissa(v)
#elif defined(ROUND_BF16)
// ROUND_BF16: the same at bfloat16's 7 mantissa bits (its range is f32's).
float round_bf16(float v) {
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return v;
    u += 0x7fffu + ((u >> 16) & 1u);
    return uintBitsToFloat(u & 0xffff0000u);
}
#define STAGE(v) round_bf16(v)
#else
#define STAGE(v) (v)
#endif
#include "common.glsl"

// Planted bugs for the ladder's fault catalogue (src/vk/engine/faults.rs),
// compiled as separate variants:
// FAULT_NO_BOUNDS: staged loads skip the bounds check and the zero padding;
// indices past the matrix read whatever lies there (clamped to the buffer, so
// the bug reads wrong values rather than faulting the device).
// FAULT_F16_ACCUM: partial sums are kept at f16 precision and range (no clamp:
// past 65504 they become Inf), as a naive f16 kernel without loss scaling.
#ifdef FAULT_F16_ACCUM
float to_f16(float v) {
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return v;
    u += 0x0fffu + ((u >> 13) & 1u);
    float r = uintBitsToFloat(u & 0xffffe000u);
    return abs(r) > 65504.0 ? r * uintBitsToFloat(0x7f800000u) : r;
}
vec4 to_f16_4(vec4 v) { return vec4(to_f16(v.x), to_f16(v.y), to_f16(v.z), to_f16(v.w)); }
#define ACC(v) to_f16_4(v)
#else
#define ACC(v) (v)
#endif

#define BM 128
#define BN 64
#define BK 16
#define WG_X 16
#define WG_Y 16
#define THREADS (WG_X * WG_Y)
// Values of A and B each thread stages per slice.
#define A_LOADS (BM * BK / THREADS)
#define B_LOADS (BK * BN / THREADS)

layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { DTYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { DTYPE b[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { DTYPE c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    uint k_chunk;  // K range of one workgroup z (k for an unsplit product)
    uint c_stride; // elements between the output planes of successive z
    uint slices;   // the reduce kernel's plane count (unused here)
    uint reserved;
} pc;

// Slice p of A is As[p][0..BM/4): rows 4r..4r+3 in one vec4. One vec4 of
// padding per row keeps the staging stores of the untransposed operands to
// two-way bank conflicts; the inner loop reads whole rows.
shared vec4 As[BK][BM / 4 + 1];
shared vec4 Bs[BK][BN / 4 + 1];

// The next slice, in registers while the current one is multiplied.
float ra[A_LOADS];
float rb[B_LOADS];

// Staged element i of this thread: (row r, k p) of A, (k p, column q) of B,
// chosen so that consecutive threads read consecutive addresses.
uint a_row(uint tid, uint i) { return pc.ta != 0u ? tid % BM : tid / BK + (THREADS / BK) * i; }
uint a_k(uint tid, uint i) { return pc.ta != 0u ? tid / BM + (THREADS / BM) * i : tid % BK; }
uint b_col(uint tid, uint i) { return pc.tb != 0u ? tid / BK + (THREADS / BK) * i : tid % BN; }
uint b_k(uint tid, uint i) { return pc.tb != 0u ? tid % BK : tid / BN + (THREADS / BN) * i; }

void load_slice(uint tid, uint row0, uint col0, uint k0, uint k_end) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        const uint gr = row0 + a_row(tid, i), gp = k0 + a_k(tid, i);
#ifdef FAULT_NO_BOUNDS
        ra[i] = float(a[min(pc.ta != 0u ? pc.a_off + gp * pc.lda + gr : pc.a_off + gr * pc.lda + gp, a.length() - 1)]);
#else
        float v = 0.0;
        if (gr < pc.m && gp < k_end) {
            v = float(pc.ta != 0u ? a[pc.a_off + gp * pc.lda + gr] : a[pc.a_off + gr * pc.lda + gp]);
        }
        ra[i] = v;
#endif
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        const uint gq = col0 + b_col(tid, i), gp = k0 + b_k(tid, i);
#ifdef FAULT_NO_BOUNDS
        rb[i] = float(b[min(pc.tb != 0u ? pc.b_off + gq * pc.ldb + gp : pc.b_off + gp * pc.ldb + gq, b.length() - 1)]);
#else
        float v = 0.0;
        if (gq < pc.n && gp < k_end) {
            v = float(pc.tb != 0u ? b[pc.b_off + gq * pc.ldb + gp] : b[pc.b_off + gp * pc.ldb + gq]);
        }
        rb[i] = v;
#endif
    }
}

void store_slice(uint tid) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        const uint r = a_row(tid, i);
        As[a_k(tid, i)][r / 4u][r % 4u] = STAGE(ra[i]);
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        const uint q = b_col(tid, i);
        Bs[b_k(tid, i)][q / 4u][q % 4u] = STAGE(rb[i]);
    }
}

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint tid = ty * WG_X + tx;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint k_begin = min(pc.k, z * pc.k_chunk);
    const uint k_end = min(pc.k, k_begin + pc.k_chunk);
    const uint slices = (k_end - k_begin + BK - 1u) / BK;

    // acc[i] holds row i of the micro-tile (rows 4·ty + i, then 64 + 4·ty + i - 4).
    vec4 acc[8];
    [[unroll]] for (uint i = 0; i < 8u; ++i) acc[i] = vec4(0.0);

    if (slices > 0u) load_slice(tid, row0, col0, k_begin, k_end);
    for (uint s = 0u; s < slices; ++s) {
        store_slice(tid);
        barrier();
        if (s + 1u < slices) load_slice(tid, row0, col0, k_begin + (s + 1u) * BK, k_end);

        vec4 part[8];
        [[unroll]] for (uint i = 0; i < 8u; ++i) part[i] = vec4(0.0);
        [[unroll]] for (uint p = 0; p < BK; ++p) {
            const vec4 a0 = As[p][ty];
            const vec4 a1 = As[p][WG_Y + ty];
            const vec4 bv = Bs[p][tx];
            part[0] = ACC(fma(vec4(a0.x), bv, part[0]));
            part[1] = ACC(fma(vec4(a0.y), bv, part[1]));
            part[2] = ACC(fma(vec4(a0.z), bv, part[2]));
            part[3] = ACC(fma(vec4(a0.w), bv, part[3]));
            part[4] = ACC(fma(vec4(a1.x), bv, part[4]));
            part[5] = ACC(fma(vec4(a1.y), bv, part[5]));
            part[6] = ACC(fma(vec4(a1.z), bv, part[6]));
            part[7] = ACC(fma(vec4(a1.w), bv, part[7]));
        }
        [[unroll]] for (uint i = 0; i < 8u; ++i) acc[i] = ACC(acc[i] + part[i]);
        barrier();
    }

    const uint plane = pc.c_off + z * pc.c_stride;
    [[unroll]] for (uint i = 0; i < 8u; ++i) {
        const uint gr = row0 + (i < 4u ? 4u * ty + i : BM / 2u + 4u * ty + (i - 4u));
        if (gr >= pc.m) continue;
        [[unroll]] for (uint j = 0; j < 4u; ++j) {
            const uint gq = col0 + 4u * tx + j;
            if (gq >= pc.n) continue;
            const uint idx = plane + gr * pc.ldc + gq;
            float v = acc[i][j];
            if (pc.accumulate != 0u) v += float(c[idx]);
            c[idx] = DTYPE(v);
        }
    }
}
