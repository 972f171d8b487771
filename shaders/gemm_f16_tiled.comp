#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate) with f16 inputs and f32
// accumulation, on any device: the mixed-precision products where there are
// no cooperative matrices. A and B are f32 in memory; each value becomes the
// f16 value that a conversion to float16_t gives (round to nearest, ties to
// even, at f16's 11 significant bits; below 2^-14 on f16's subnormal grid of
// 2^-24; past 65504 ±Inf; NaN stays) as it is staged into shared memory, so
// the products see exactly what the cooperative-matrix kernels see: f16's
// precision and f16's range, which is what the loss scale is for. The
// conversion is done on the bits (NVIDIA's driver was seen to drop float →
// float16_t → float round trips).
//
// Layout and conventions as gemm_f32.comp: A holds [M, K] (row i at
// a_off + i*lda), or [K, M] when ta != 0; B holds [K, N], or [N, K] when
// tb != 0. The push-constant block is the same 16 × u32 (64 bytes).
//
// Tiling (simple on purpose: this kernel is the reference path on CPU
// devices): a workgroup of 16×16 threads computes a 64×64 tile of C, walking
// K in slices of 16 staged through shared memory; thread (tx, ty) owns a 4×4
// micro-tile. Each slice is summed on its own (an FMA chain of 16 from zero)
// and then added to the running total, as the f32 kernel does. Loads outside
// the matrices read zero and stores outside are skipped: any M, N, K, offsets.
//
// Split-K: workgroup z covers k in [z·k_chunk, min(k, (z+1)·k_chunk)) and
// writes its plane at c_off + z·c_stride (see gemm_splitk_reduce.comp).
#extension GL_EXT_control_flow_attributes : require

#define BM 64
#define BN 64
#define BK 16
#define WG 16
#define THREADS (WG * WG)
#define A_LOADS (BM * BK / THREADS)
#define B_LOADS (BK * BN / THREADS)

layout(local_size_x = WG, local_size_y = WG, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { float c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    uint k_chunk;
    uint c_stride;
    uint slices;
    uint bias;  // 0, or 1 + the offset in B's binding of a row vector added to C's rows (gemm_f32.comp)
} pc;

// The f16 value of v, as an f32.
float to_f16(float v) {
    const uint u = floatBitsToUint(v);
    const uint sign = u & 0x80000000u;
    if ((u & 0x7f800000u) == 0x7f800000u) return v; // Inf and NaN stay
    const float x = abs(v);
    if (x < 6.103515625e-05) {
        // f16's subnormals: multiples of 2^-24 (x·2^24 < 1024 is exact).
        const float q = roundEven(x * 16777216.0) * 5.9604644775390625e-08;
        return uintBitsToFloat(floatBitsToUint(q) | sign);
    }
    uint r = u + 0x0fffu + ((u >> 13) & 1u);
    r &= 0xffffe000u;
    // Past f16's largest finite value the conversion gives Inf (65504 stays;
    // everything from 65520 up rounds to 65536 above, and so to Inf).
    if (uintBitsToFloat(r & 0x7fffffffu) > 65504.0) return uintBitsToFloat(sign | 0x7f800000u);
    return uintBitsToFloat(r);
}

shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

uint a_row(uint tid, uint i) { return pc.ta != 0u ? tid % BM : tid / BK + (THREADS / BK) * i; }
uint a_k(uint tid, uint i) { return pc.ta != 0u ? tid / BM + (THREADS / BM) * i : tid % BK; }
uint b_col(uint tid, uint i) { return pc.tb != 0u ? tid / BK + (THREADS / BK) * i : tid % BN; }
uint b_k(uint tid, uint i) { return pc.tb != 0u ? tid % BK : tid / BN + (THREADS / BN) * i; }

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint tid = ty * WG + tx;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint k_begin = min(pc.k, z * pc.k_chunk);
    const uint k_end = min(pc.k, k_begin + pc.k_chunk);

    float acc[4][4];
    [[unroll]] for (uint i = 0; i < 4u; ++i)
        [[unroll]] for (uint j = 0; j < 4u; ++j) acc[i][j] = 0.0;

    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
        // Every load is issued before any value is used (an index outside the
        // matrix reads element 0 and is then replaced by zero): converting each
        // value as it arrives, behind its own bounds check, made every load
        // wait for the one before.
        float va[A_LOADS], vb[B_LOADS];
        [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
            const uint gr = row0 + a_row(tid, i), gp = k0 + a_k(tid, i);
            const bool inside = gr < pc.m && gp < k_end;
            const uint at = pc.ta != 0u ? pc.a_off + gp * pc.lda + gr : pc.a_off + gr * pc.lda + gp;
            va[i] = a[inside ? at : 0u];
            va[i] = inside ? va[i] : 0.0;
        }
        [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
            const uint gq = col0 + b_col(tid, i), gp = k0 + b_k(tid, i);
            const bool inside = gq < pc.n && gp < k_end;
            const uint at = pc.tb != 0u ? pc.b_off + gq * pc.ldb + gp : pc.b_off + gp * pc.ldb + gq;
            vb[i] = b[inside ? at : 0u];
            vb[i] = inside ? vb[i] : 0.0;
        }
        [[unroll]] for (uint i = 0; i < A_LOADS; ++i) As[a_k(tid, i)][a_row(tid, i)] = to_f16(va[i]);
        [[unroll]] for (uint i = 0; i < B_LOADS; ++i) Bs[b_k(tid, i)][b_col(tid, i)] = to_f16(vb[i]);
        barrier();
        float part[4][4];
        [[unroll]] for (uint i = 0; i < 4u; ++i)
            [[unroll]] for (uint j = 0; j < 4u; ++j) part[i][j] = 0.0;
        [[unroll]] for (uint p = 0; p < BK; ++p) {
            float av[4], bv[4];
            [[unroll]] for (uint i = 0; i < 4u; ++i) av[i] = As[p][4u * ty + i];
            [[unroll]] for (uint j = 0; j < 4u; ++j) bv[j] = Bs[p][4u * tx + j];
            [[unroll]] for (uint i = 0; i < 4u; ++i)
                [[unroll]] for (uint j = 0; j < 4u; ++j) part[i][j] = fma(av[i], bv[j], part[i][j]);
        }
        [[unroll]] for (uint i = 0; i < 4u; ++i)
            [[unroll]] for (uint j = 0; j < 4u; ++j) acc[i][j] += part[i][j];
        barrier();
    }

    const uint plane = pc.c_off + z * pc.c_stride;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        const uint gr = row0 + 4u * ty + i;
        if (gr >= pc.m) continue;
        [[unroll]] for (uint j = 0; j < 4u; ++j) {
            const uint gq = col0 + 4u * tx + j;
            if (gq >= pc.n) continue;
            const uint idx = plane + gr * pc.ldc + gq;
            float v = acc[i][j];
            if (pc.accumulate != 0u) v += c[idx];
            if (pc.bias != 0u) v += b[pc.bias - 1u + gq];
            c[idx] = v;
        }
    }
}
