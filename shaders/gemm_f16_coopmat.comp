#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate) on cooperative matrices:
// A and B are f32 in memory and rounded to f16 as they are staged into shared
// memory; 16×16×16 f16 × f16 → f32 products accumulate in f32.
// The push-constant block is the tiled kernel's (16 × u32 = 64 bytes).
//
// Tiling: a workgroup of 4 subgroups of 32 invocations computes a BM×BN =
// 64×64 tile of C, walking K in BK = 32 slices. Each subgroup owns a 32×32
// quarter as 2×2 accumulators. Every global load goes through a scalar,
// bounds-checked, zero-padded copy into shared memory, so the cooperative
// loads never read outside the matrices whatever M, N and K are; the result
// goes back through shared memory and bounds-checked scalar stores.
// Needs subgroup size 32 (the engine checks before it picks this kernel).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#define BM 64
#define BN 64
#define BK 32
#define ASTR (BK + 8)
#define BSTR (BN + 8)
#define THREADS 128

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { float c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    // The tiled kernel's split-K fields: this kernel is never split (the
    // engine's planner keeps one slice for it) and ignores them.
    uint k_chunk; uint c_stride; uint slices;
    uint bias;  // 0, or 1 + the offset in B's binding of a row vector added to C's rows (gemm_f32.comp)
} pc;

shared float16_t As[BM * ASTR];
shared float16_t Bs[BK * BSTR];
shared float Cs[BM * BN];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint sr = (sg / 2u) * 32u;
    const uint sc = (sg % 2u) * 32u;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    for (uint i = 0; i < 2; ++i)
        for (uint j = 0; j < 2; ++j)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    for (uint k0 = 0; k0 < pc.k; k0 += BK) {
        for (uint e = tid; e < BM * BK; e += THREADS) {
            uint r, p;
            if (pc.ta != 0u) { p = e / BM; r = e % BM; } else { r = e / BK; p = e % BK; }
            const uint gr = row0 + r, gp = k0 + p;
            float v = 0.0;
            if (gr < pc.m && gp < pc.k) {
                v = pc.ta != 0u ? a[pc.a_off + gp * pc.lda + gr] : a[pc.a_off + gr * pc.lda + gp];
            }
            As[r * ASTR + p] = float16_t(v);
        }
        for (uint e = tid; e < BK * BN; e += THREADS) {
            uint q, p;
            if (pc.tb != 0u) { q = e / BK; p = e % BK; } else { p = e / BN; q = e % BN; }
            const uint gq = col0 + q, gp = k0 + p;
            float v = 0.0;
            if (gq < pc.n && gp < pc.k) {
                v = pc.tb != 0u ? b[pc.b_off + gq * pc.ldb + gp] : b[pc.b_off + gp * pc.ldb + gq];
            }
            Bs[p * BSTR + q] = float16_t(v);
        }
        barrier();
        for (uint kk = 0; kk < BK; kk += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[2];
            for (uint i = 0; i < 2; ++i)
                coopMatLoad(fa[i], As, (sr + 16u * i) * ASTR + kk, ASTR, gl_CooperativeMatrixLayoutRowMajor);
            for (uint j = 0; j < 2; ++j)
                coopMatLoad(fb[j], Bs, kk * BSTR + sc + 16u * j, BSTR, gl_CooperativeMatrixLayoutRowMajor);
            for (uint i = 0; i < 2; ++i)
                for (uint j = 0; j < 2; ++j)
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }

    for (uint i = 0; i < 2; ++i)
        for (uint j = 0; j < 2; ++j)
            coopMatStore(acc[i][j], Cs, (sr + 16u * i) * BN + sc + 16u * j, BN, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (uint e = tid; e < BM * BN; e += THREADS) {
        const uint gr = row0 + e / BN, gq = col0 + e % BN;
        if (gr >= pc.m || gq >= pc.n) continue;
        const uint idx = pc.c_off + gr * pc.ldc + gq;
        float v = Cs[e];
        if (pc.accumulate != 0u) v += c[idx];
        if (pc.bias != 0u) v += b[pc.bias - 1u + gq];
        c[idx] = v;
    }
}
