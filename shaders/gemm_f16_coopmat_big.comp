#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate) on cooperative matrices,
// 128×128 output tiles: the mixed-precision step's products on devices with
// VK_KHR_cooperative_matrix (16×16×16, f16 × f16 → f32) and subgroups of 32.
// A and B are f32 in memory (the loss scale already in the values) and are
// converted to f16 as they are staged into shared memory; the products
// accumulate in f32. Layout, push constants (16 × u32) and split-K fields as
// gemm_f32.comp: A holds [M, K] (or [K, M] with ta), B holds [K, N] (or
// [N, K] with tb); workgroup z covers k in [z·k_chunk, min(k, (z+1)·k_chunk))
// and writes its plane at c_off + z·c_stride.
//
// Tiling: a workgroup of 256 invocations (8 subgroups of 32) computes a
// BM×BN = 128×128 tile of C, walking K in slices of BK = 32. The subgroups
// form a 2×4 grid; each owns a 64×32 block as 4×2 accumulators of 16×16. Per
// 16-deep step a subgroup loads 4 A and 2 B fragments from shared memory for
// 8 products. Each invocation stages 16 values of A and 16 of B per slice
// (consecutive invocations read consecutive addresses for every ta/tb); the
// next slice is read from global memory into registers (already f16) while
// the current one is multiplied, so one copy of each slice lives in shared
// memory, with two barriers per slice. Loads outside the matrices (or past
// the workgroup's K range) read zero, so the cooperative loads, which read
// shared memory only, never see a value from outside.
//
// Shared memory: A as 128×(32+8) halves (rows of 80 bytes: the 16-byte rows
// of 8 consecutive fragment rows fall in distinct banks), B as 32×(128+8)
// halves (272-byte rows), and a 16×16 f32 block per subgroup through which
// the accumulators go out: bounds-checked scalar stores handle the edges,
// `accumulate` and the split-K planes. 10240 + 8704 + 8192 = 27136 bytes.
//
// Needs subgroup size 32 (the engine checks before it picks this kernel).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#define BM 128
#define BN 128
#define BK 32
#define ASTR (BK + 8)
#define BSTR (BN + 8)
#define THREADS 256
#define SUBGROUPS 8
#define A_LOADS (BM * BK / THREADS)
#define B_LOADS (BK * BN / THREADS)
// One subgroup's block: WM×WN = 64×32, FM×FN fragments of 16×16.
#define WM 64
#define WN 32
#define FM (WM / 16)
#define FN (WN / 16)

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { float c[]; };

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

shared float16_t As[BM * ASTR];
shared float16_t Bs[BK * BSTR];
shared float Cs[SUBGROUPS * 256];

// The next slice, in registers while the current one is multiplied.
float16_t ra[A_LOADS];
float16_t rb[B_LOADS];

// Staged element i of invocation tid: (row r, k p) of A, (k p, column q) of B.
// Untransposed A and transposed B are contiguous along k, the others along
// the row or column: consecutive invocations take consecutive addresses.
uint a_row(uint tid, uint i) { return pc.ta != 0u ? tid % BM : tid / BK + (THREADS / BK) * i; }
uint a_k(uint tid, uint i) { return pc.ta != 0u ? tid / BM + (THREADS / BM) * i : tid % BK; }
uint b_col(uint tid, uint i) { return pc.tb != 0u ? tid / BK + (THREADS / BK) * i : tid % BN; }
uint b_k(uint tid, uint i) { return pc.tb != 0u ? tid % BK : tid / BN + (THREADS / BN) * i; }

void load_slice(uint tid, uint row0, uint col0, uint k0, uint k_end) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        const uint gr = row0 + a_row(tid, i), gp = k0 + a_k(tid, i);
        float v = 0.0;
        if (gr < pc.m && gp < k_end) {
            v = pc.ta != 0u ? a[pc.a_off + gp * pc.lda + gr] : a[pc.a_off + gr * pc.lda + gp];
        }
        ra[i] = float16_t(v);
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        const uint gq = col0 + b_col(tid, i), gp = k0 + b_k(tid, i);
        float v = 0.0;
        if (gq < pc.n && gp < k_end) {
            v = pc.tb != 0u ? b[pc.b_off + gq * pc.ldb + gp] : b[pc.b_off + gp * pc.ldb + gq];
        }
        rb[i] = float16_t(v);
    }
}

void store_slice(uint tid) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) As[a_row(tid, i) * ASTR + a_k(tid, i)] = ra[i];
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) Bs[b_k(tid, i) * BSTR + b_col(tid, i)] = rb[i];
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID;
    const uint lane = gl_SubgroupInvocationID;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint k_begin = min(pc.k, z * pc.k_chunk);
    const uint k_end = min(pc.k, k_begin + pc.k_chunk);
    const uint slices = (k_end - k_begin + BK - 1u) / BK;
    // This subgroup's block inside the tile.
    const uint wr = (sg / (BN / WN)) * WM;
    const uint wc = (sg % (BN / WN)) * WN;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    if (slices > 0u) load_slice(tid, row0, col0, k_begin, k_end);
    for (uint s = 0u; s < slices; ++s) {
        store_slice(tid);
        barrier();
        if (s + 1u < slices) load_slice(tid, row0, col0, k_begin + (s + 1u) * BK, k_end);
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[FM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[FN];
            [[unroll]] for (uint i = 0; i < FM; ++i)
                coopMatLoad(fa[i], As, (wr + 16u * i) * ASTR + kk, ASTR, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0; j < FN; ++j)
                coopMatLoad(fb[j], Bs, kk * BSTR + wc + 16u * j, BSTR, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint i = 0; i < FM; ++i)
                [[unroll]] for (uint j = 0; j < FN; ++j)
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }

    // Out through this subgroup's 16×16 block, one accumulator at a time.
    const uint plane = pc.c_off + z * pc.c_stride;
    const uint cs = sg * 256u;
    [[unroll]] for (uint i = 0; i < FM; ++i) {
        [[unroll]] for (uint j = 0; j < FN; ++j) {
            coopMatStore(acc[i][j], Cs, cs, 16, gl_CooperativeMatrixLayoutRowMajor);
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += 32u) {
                const uint gr = row0 + wr + 16u * i + e / 16u;
                const uint gq = col0 + wc + 16u * j + e % 16u;
                if (gr < pc.m && gq < pc.n) {
                    const uint idx = plane + gr * pc.ldc + gq;
                    float v = Cs[cs + e];
                    if (pc.accumulate != 0u) v += c[idx];
                    c[idx] = v;
                }
            }
            subgroupBarrier();
        }
    }
}
