#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate), row-major with leading
// dimensions lda, ldb, ldc and element offsets into each buffer.
//   A holds [M, K] (row i at a_off + i*lda), or [K, M] when ta != 0.
//   B holds [K, N] (row p at b_off + p*ldb), or [N, K] when tb != 0.
// Tiling: a workgroup of 16×16 threads computes a BM×BN = 64×64 tile of C,
// walking K in BK = 16 slices staged through shared memory; each thread owns a
// 4×4 micro-tile (rows ty + 16·i, columns tx + 16·j), summing each K-slice
// apart before adding it to its total. Loads outside the matrix
// read zero, stores outside it are skipped: any M, N, K is correct.
// The push-constant block is 12 × u32 = 48 bytes (src/vk/ops.rs asserts it).
// ROUND_F16: round every staged input to f16 precision (the f16 precision of
// the ladder on devices without cooperative matrices); accumulation stays f32.
// The rounding is done on the bits (to nearest, ties to even, at f16's 10
// mantissa bits): NVIDIA's driver was seen to drop both float(float16_t(v))
// and unpackHalf2x16(packHalf2x16(v)) round trips, leaving inputs unrounded.
// f16's exponent range is not modelled (no overflow to Inf, no f16
// subnormals); for the rung's unit-normal inputs that changes nothing visible.
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
#define ACC(v) to_f16(v)
#else
#define ACC(v) (v)
#endif


#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define WG_X 16
#define WG_Y 16
#define THREADS (WG_X * WG_Y)

layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { DTYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { DTYPE b[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { DTYPE c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
} pc;

// +1 column of padding keeps the transposed stores off one bank.
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint tid = ty * WG_X + tx;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;

    float acc[TM][TN];
    for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j)
            acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < pc.k; k0 += BK) {
        // Stage A: BM×BK values, THREADS at a time, contiguous along memory.
        for (uint e = tid; e < BM * BK; e += THREADS) {
            uint r, p;
            if (pc.ta != 0u) { p = e / BM; r = e % BM; } else { r = e / BK; p = e % BK; }
            const uint gr = row0 + r, gp = k0 + p;
            float v = 0.0;
#ifdef FAULT_NO_BOUNDS
            v = float(a[min(pc.ta != 0u ? pc.a_off + gp * pc.lda + gr : pc.a_off + gr * pc.lda + gp, a.length() - 1)]);
#else
            if (gr < pc.m && gp < pc.k) {
                v = float(pc.ta != 0u ? a[pc.a_off + gp * pc.lda + gr] : a[pc.a_off + gr * pc.lda + gp]);
            }
#endif
            As[p][r] = STAGE(v);
        }
        // Stage B: BK×BN values.
        for (uint e = tid; e < BK * BN; e += THREADS) {
            uint q, p;
            if (pc.tb != 0u) { q = e / BK; p = e % BK; } else { p = e / BN; q = e % BN; }
            const uint gq = col0 + q, gp = k0 + p;
            float v = 0.0;
#ifdef FAULT_NO_BOUNDS
            v = float(b[min(pc.tb != 0u ? pc.b_off + gq * pc.ldb + gp : pc.b_off + gp * pc.ldb + gq, b.length() - 1)]);
#else
            if (gq < pc.n && gp < pc.k) {
                v = float(pc.tb != 0u ? b[pc.b_off + gq * pc.ldb + gp] : b[pc.b_off + gp * pc.ldb + gq]);
            }
#endif
            Bs[p][q] = STAGE(v);
        }
        barrier();

        // Two-level summation: each K-slice is summed on its own, then added
        // to the running total, so the rounding error grows like that of a
        // blocked sum (as the CPU engine's) rather than a K-long chain.
        float part[TM][TN];
        for (uint i = 0; i < TM; ++i)
            for (uint j = 0; j < TN; ++j)
                part[i][j] = 0.0;
        for (uint p = 0; p < BK; ++p) {
            float av[TM];
            float bv[TN];
            for (uint i = 0; i < TM; ++i) av[i] = As[p][ty + WG_Y * i];
            for (uint j = 0; j < TN; ++j) bv[j] = Bs[p][tx + WG_X * j];
            for (uint i = 0; i < TM; ++i)
                for (uint j = 0; j < TN; ++j)
                    part[i][j] = ACC(fma(av[i], bv[j], part[i][j]));
        }
        for (uint i = 0; i < TM; ++i)
            for (uint j = 0; j < TN; ++j)
                acc[i][j] = ACC(acc[i][j] + part[i][j]);
        barrier();
    }

    for (uint i = 0; i < TM; ++i) {
        const uint gr = row0 + ty + WG_Y * i;
        if (gr >= pc.m) continue;
        for (uint j = 0; j < TN; ++j) {
            const uint gq = col0 + tx + WG_X * j;
            if (gq >= pc.n) continue;
            const uint idx = pc.c_off + gr * pc.ldc + gq;
            float v = acc[i][j];
            if (pc.accumulate != 0u) v += float(c[idx]);
            c[idx] = DTYPE(v);
        }
    }
}
