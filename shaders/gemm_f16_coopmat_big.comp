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
// Tiling: a workgroup of 128 invocations (4 subgroups of 32) computes a
// BM×BN = 128×128 tile of C, walking K in slices of BK = 32. The subgroups
// form a 2×2 grid; each owns a 64×64 block as 4×4 accumulators of 16×16, so
// per 16-deep step a subgroup loads 4 A and 4 B fragments from shared memory
// for 16 products (the shared-memory traffic per product is half that of 4×2
// blocks).
//
// Staging: every operand is read in the order it lies in memory, four
// consecutive f32 at a time. A slice wholly inside both matrices, with
// offsets and leading dimensions that are multiples of 4, is read as
// sixteen 16-byte loads per invocation with no bounds check and no branch
// between them; the other slices group by group (zero outside the matrices
// or past the workgroup's K range, so the fragments never see a value from
// outside). The values stay f32 in registers while the current slice is
// multiplied and are converted to f16 only as they are stored into shared
// memory: converting them on arrival made every load wait for its value
// before the next was issued (the kernel ran at 18 TFLOP/s on the H200, and
// at 120 with the loads issued together).
//
// Shared memory keeps each operand in its memory order: A as [BM][BK+8]
// halves (rows along k) or, with ta, [BK][BM+8] (rows along m), loaded as a
// row- or column-major fragment; likewise B as [BK][BN+8] or, with tb,
// [BN][BK+8]. The paddings put the 16-byte rows of 8 consecutive fragment
// rows in distinct banks. Two stages: slice s+1 is read into registers while
// slice s is multiplied, then stored into the other stage; one barrier per
// slice.
//
// Out: a fragment that lies wholly inside C goes straight to memory
// (coopMatStore; with accumulate the old block is loaded and added first);
// one that crosses the edge goes through a 16×16 f32 block per subgroup and
// bounds-checked scalar stores. With a bias (gemm_f32.comp), a fragment
// inside C adds a 16×16 block of the bias's 16 values repeated in each row,
// staged in that subgroup's block.
//
// Shared memory: 2 stages × 2 operands × 1280 × 8 bytes + 4 × 1 KiB = 45056
// bytes. Needs subgroup size 32 (the engine checks before it picks this kernel).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#define BM 128
#define BN 128
#define BK 32
#define THREADS 128
#define SUBGROUPS 4
// Row strides in halves of the four staged layouts (all multiples of 8).
#define STR_K (BK + 8)   // rows along k: A, B with tb
#define STR_M (BM + 8)   // rows along m: A with ta
#define STR_N (BN + 8)   // rows along n: B
// One operand's stage, in f16vec4: the larger of its two layouts.
#define OPND (BM * STR_K / 4)
#define STAGE (2 * OPND)
// Vec4 loads per invocation per slice and operand: 128×32 values / 4 / 128.
#define LOADS (BM * BK / 4 / THREADS)
// One subgroup's block: WM×WN = 64×64, 4×4 fragments of 16×16.
#define WM 64
#define WN 64

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer ABuf4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { float c[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    uint k_chunk;  // K range of one workgroup z (k for an unsplit product)
    uint c_stride; // elements between the output planes of successive z
    uint slices;   // the reduce kernel's plane count (unused here)
    uint bias;  // 0, or 1 + the offset in B's binding of a row vector added to C's rows (gemm_f32.comp)
} pc;

// [stage][A then B], each operand OPND f16vec4.
shared f16vec4 stages[2 * STAGE];
shared float Cs[SUBGROUPS * 256];

// The next slice as read (f32), in registers while the current one is
// multiplied; converted to f16 when it is stored into shared memory. (Were
// it converted as it arrives, every load would wait for its value before
// the next is issued.)
vec4 ra[LOADS];
vec4 rb[LOADS];

// Group i of invocation tid in a slice stored along k (32 values = 8 groups
// per row, 16 rows per pass) or along m / n (128 values = 32 groups per row,
// 4 rows per pass): (outer row within the slice, first inner index).
uvec2 along_k(uint tid, uint i) { return uvec2(tid / 8u + 16u * i, (tid % 8u) * 4u); }
uvec2 along_mn(uint tid, uint i) { return uvec2(tid / 32u + 4u * i, (tid % 32u) * 4u); }

// Four consecutive values from `base`, zero outside: `outer_ok` for the
// row, the first `inner_left` of the four inside (a 16-byte load where all
// four are and `vec_ok`).
vec4 edge4_a(uint base, bool outer_ok, uint inner_left, bool vec_ok) {
    vec4 v = vec4(0.0);
    if (outer_ok) {
        if (vec_ok && inner_left >= 4u) {
            v = a4[base / 4u];
        } else {
            [[unroll]] for (uint e = 0; e < 4u; ++e) {
                if (e < inner_left) v[e] = a[base + e];
            }
        }
    }
    return v;
}

vec4 edge4_b(uint base, bool outer_ok, uint inner_left, bool vec_ok) {
    vec4 v = vec4(0.0);
    if (outer_ok) {
        if (vec_ok && inner_left >= 4u) {
            v = b4[base / 4u];
        } else {
            [[unroll]] for (uint e = 0; e < 4u; ++e) {
                if (e < inner_left) v[e] = b[base + e];
            }
        }
    }
    return v;
}

// Where group i lies in memory: A's row (or, with ta, k) and column, and
// B's likewise; selects, not branches, so that the loads of a fast slice
// are issued back to back.
#define GROUP_PLACE(i)                                                         \
    const uvec2 pa = pc.ta != 0u ? along_mn(tid, i) : along_k(tid, i);        \
    const uint a_outer = (pc.ta != 0u ? k0 : row0) + pa.x;                     \
    const uint a_inner = (pc.ta != 0u ? row0 : k0) + pa.y;                     \
    const uvec2 pb = pc.tb != 0u ? along_k(tid, i) : along_mn(tid, i);        \
    const uint b_outer = (pc.tb != 0u ? col0 : k0) + pb.x;                     \
    const uint b_inner = (pc.tb != 0u ? k0 : col0) + pb.y;                     \
    const uint a_base = pc.a_off + a_outer * pc.lda + a_inner;                 \
    const uint b_base = pc.b_off + b_outer * pc.ldb + b_inner;

#define FAST_GROUP(i)                                                          \
    {                                                                          \
        GROUP_PLACE(i)                                                         \
        ra[i] = a4[a_base / 4u];                                               \
        rb[i] = b4[b_base / 4u];                                               \
    }

#define EDGE_GROUP(i)                                                          \
    {                                                                          \
        GROUP_PLACE(i)                                                         \
        const uint a_on = pc.ta != 0u ? k_end : pc.m;                          \
        const uint a_in = pc.ta != 0u ? pc.m : k_end;                          \
        const uint b_on = pc.tb != 0u ? pc.n : k_end;                          \
        const uint b_in = pc.tb != 0u ? k_end : pc.n;                          \
        ra[i] = edge4_a(a_base, a_outer < a_on, a_in - min(a_inner, a_in), va);\
        rb[i] = edge4_b(b_base, b_outer < b_on, b_in - min(b_inner, b_in), vb);\
    }

// A slice wholly inside both matrices with aligned rows is read without a
// single bounds check (the common case); the others group by group.
void load_slice(uint tid, uint row0, uint col0, uint k0, uint k_end, bool va, bool vb) {
#ifdef PROBE_NO_GLOBAL
    [[unroll]] for (uint i = 0; i < LOADS; ++i) {
        ra[i] = vec4(float(k0 & 1u));
        rb[i] = vec4(float(tid & 1u));
    }
    return;
#endif
    if (va && vb && row0 + BM <= pc.m && col0 + BN <= pc.n && k0 + BK <= k_end) {
        FAST_GROUP(0) FAST_GROUP(1) FAST_GROUP(2) FAST_GROUP(3)
        FAST_GROUP(4) FAST_GROUP(5) FAST_GROUP(6) FAST_GROUP(7)
    } else {
        EDGE_GROUP(0) EDGE_GROUP(1) EDGE_GROUP(2) EDGE_GROUP(3)
        EDGE_GROUP(4) EDGE_GROUP(5) EDGE_GROUP(6) EDGE_GROUP(7)
    }
}

#define STORE_GROUP(i)                                                         \
    p = pc.ta != 0u ? along_mn(tid, i) : along_k(tid, i);                      \
    stages[sa + (p.x * (pc.ta != 0u ? STR_M : STR_K) + p.y) / 4u] = f16vec4(ra[i]);     \
    p = pc.tb != 0u ? along_k(tid, i) : along_mn(tid, i);                      \
    stages[sb + (p.x * (pc.tb != 0u ? STR_K : STR_N) + p.y) / 4u] = f16vec4(rb[i]);

void store_slice(uint tid, uint stage) {
    const uint sa = stage * STAGE;
    const uint sb = sa + OPND;
    uvec2 p;
    STORE_GROUP(0) STORE_GROUP(1) STORE_GROUP(2) STORE_GROUP(3)
    STORE_GROUP(4) STORE_GROUP(5) STORE_GROUP(6) STORE_GROUP(7)
}

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>

// Fragment i of this subgroup's A rows, and j of its B columns, at depth kk.
#define LOAD_A(f, i)                                                                        \
    if (pc.ta != 0u) {                                                                      \
        coopMatLoad(f, stages, sa + (kk * STR_M + wr + 16u * i) / 4u, STR_M / 4u,           \
                    gl_CooperativeMatrixLayoutColumnMajor);                                 \
    } else {                                                                                \
        coopMatLoad(f, stages, sa + ((wr + 16u * i) * STR_K + kk) / 4u, STR_K / 4u,         \
                    gl_CooperativeMatrixLayoutRowMajor);                                    \
    }
#define LOAD_B(f, j)                                                                        \
    if (pc.tb != 0u) {                                                                      \
        coopMatLoad(f, stages, sb + ((wc + 16u * j) * STR_K + kk) / 4u, STR_K / 4u,         \
                    gl_CooperativeMatrixLayoutColumnMajor);                                 \
    } else {                                                                                \
        coopMatLoad(f, stages, sb + (kk * STR_N + wc + 16u * j) / 4u, STR_N / 4u,           \
                    gl_CooperativeMatrixLayoutRowMajor);                                    \
    }
#define MMA_ROW(i)                                                             \
    c##i##0 = coopMatMulAdd(a##i, b0, c##i##0);                                \
    c##i##1 = coopMatMulAdd(a##i, b1, c##i##1);                                \
    c##i##2 = coopMatMulAdd(a##i, b2, c##i##2);                                \
    c##i##3 = coopMatMulAdd(a##i, b3, c##i##3);

// Accumulator (i, j) out to C (see the header), `old` its block of C as it
// was (loaded by LOAD_OLD where the fragment lies inside C and accumulate).
#define STORE_C(acc, old, i, j)                                                             \
    {                                                                                       \
        const uint r = row0 + wr + 16u * i;                                                 \
        const uint q = col0 + wc + 16u * j;                                                 \
        if (r + 16u <= pc.m && q + 16u <= pc.n) {                                           \
            const uint idx = plane + r * pc.ldc + q;                                        \
            if (pc.accumulate != 0u) acc = acc + old;                                       \
            if (pc.bias != 0u) {                                                            \
                for (uint e = lane; e < 256u; e += 32u) Cs[cs + e] = bias_v[j];             \
                subgroupBarrier();                                                          \
                ACC brow;                                                                   \
                coopMatLoad(brow, Cs, cs, 16, gl_CooperativeMatrixLayoutRowMajor);          \
                acc = acc + brow;                                                           \
                subgroupBarrier();                                                          \
            }                                                                               \
            coopMatStore(acc, c, idx, pc.ldc, gl_CooperativeMatrixLayoutRowMajor);          \
        } else if (r < pc.m && q < pc.n) {                                                  \
            coopMatStore(acc, Cs, cs, 16, gl_CooperativeMatrixLayoutRowMajor);              \
            subgroupBarrier();                                                              \
            for (uint e = lane; e < 256u; e += 32u) {                                       \
                const uint gr = r + e / 16u;                                                \
                const uint gq = q + e % 16u;                                                \
                if (gr < pc.m && gq < pc.n) {                                               \
                    const uint ci = plane + gr * pc.ldc + gq;                               \
                    float v = Cs[cs + e];                                                   \
                    if (pc.accumulate != 0u) v += c[ci];                                    \
                    if (pc.bias != 0u) v += bias_v[j];                                      \
                    c[ci] = v;                                                              \
                }                                                                           \
            }                                                                               \
            subgroupBarrier();                                                              \
        }                                                                                   \
    }
// The old C of fragment (i, j) where STORE_C adds it: a row's four are
// loaded before any of them is stored (a load after a store to C waits for
// it, the bindings may alias).
#define LOAD_OLD(old, i, j)                                                                 \
    ACC old = ACC(0.0);                                                                     \
    {                                                                                       \
        const uint r = row0 + wr + 16u * i;                                                 \
        const uint q = col0 + wc + 16u * j;                                                 \
        if (pc.accumulate != 0u && r + 16u <= pc.m && q + 16u <= pc.n)                      \
            coopMatLoad(old, c, plane + r * pc.ldc + q, pc.ldc, gl_CooperativeMatrixLayoutRowMajor); \
    }
#define STORE_ROW(i)                                                                        \
    {                                                                                       \
        LOAD_OLD(o0, i, 0u) LOAD_OLD(o1, i, 1u) LOAD_OLD(o2, i, 2u) LOAD_OLD(o3, i, 3u)     \
        STORE_C(c##i##0, o0, i, 0u) STORE_C(c##i##1, o1, i, 1u)                             \
        STORE_C(c##i##2, o2, i, 2u) STORE_C(c##i##3, o3, i, 3u)                             \
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
    const bool va = pc.a_off % 4u == 0u && pc.lda % 4u == 0u;
    const bool vb = pc.b_off % 4u == 0u && pc.ldb % 4u == 0u;
    // This subgroup's block inside the tile.
    const uint wr = (sg / 2u) * WM;
    const uint wc = (sg % 2u) * WN;

    ACC c00 = ACC(0.0);
    ACC c01 = ACC(0.0);
    ACC c02 = ACC(0.0);
    ACC c03 = ACC(0.0);
    ACC c10 = ACC(0.0);
    ACC c11 = ACC(0.0);
    ACC c12 = ACC(0.0);
    ACC c13 = ACC(0.0);
    ACC c20 = ACC(0.0);
    ACC c21 = ACC(0.0);
    ACC c22 = ACC(0.0);
    ACC c23 = ACC(0.0);
    ACC c30 = ACC(0.0);
    ACC c31 = ACC(0.0);
    ACC c32 = ACC(0.0);
    ACC c33 = ACC(0.0);

    if (slices > 0u) {
        load_slice(tid, row0, col0, k_begin, k_end, va, vb);
        store_slice(tid, 0u);
        barrier();
    }
#ifdef PROBE_MMA_ONLY
    {
        const uint sa = 0u, sb = OPND, kk = 0u;
        FRAG_A a0; FRAG_A a1; FRAG_A a2; FRAG_A a3;
        FRAG_B b0; FRAG_B b1; FRAG_B b2; FRAG_B b3;
        LOAD_A(a0, 0u) LOAD_A(a1, 1u) LOAD_A(a2, 2u) LOAD_A(a3, 3u)
        LOAD_B(b0, 0u) LOAD_B(b1, 1u) LOAD_B(b2, 2u) LOAD_B(b3, 3u)
        for (uint s = 0u; s < 2u * slices; ++s) {
            MMA_ROW(0) MMA_ROW(1) MMA_ROW(2) MMA_ROW(3)
        }
    }
    const uint slices_left = 0u;
#else
    const uint slices_left = slices;
#endif
    for (uint s = 0u; s < slices_left; ++s) {
        const bool more = s + 1u < slices;
        if (more) load_slice(tid, row0, col0, k_begin + (s + 1u) * BK, k_end, va, vb);
        const uint sa = (s & 1u) * STAGE;
        const uint sb = sa + OPND;
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16u) {
            FRAG_A a0;
            FRAG_A a1;
            FRAG_A a2;
            FRAG_A a3;
            FRAG_B b0;
            FRAG_B b1;
            FRAG_B b2;
            FRAG_B b3;
            LOAD_A(a0, 0u) LOAD_A(a1, 1u) LOAD_A(a2, 2u) LOAD_A(a3, 3u)
            LOAD_B(b0, 0u) LOAD_B(b1, 1u) LOAD_B(b2, 2u) LOAD_B(b3, 3u)
            MMA_ROW(0) MMA_ROW(1) MMA_ROW(2) MMA_ROW(3)
        }
        if (more) store_slice(tid, (s + 1u) & 1u);
        barrier();
    }

    const uint plane = pc.c_off + z * pc.c_stride;
    const uint cs = sg * 256u;
    // The bias's values this lane adds, read before anything is stored (as
    // LOAD_OLD): of column fragment j, column lane % 16 (e % 16 for each of
    // the lane's elements e = lane + 32x of a 16×16 block).
    float bias_v[4];
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
        const uint gq = col0 + wc + 16u * j + lane % 16u;
        bias_v[j] = pc.bias != 0u && gq < pc.n ? b[pc.bias - 1u + gq] : 0.0;
    }
    STORE_ROW(0) STORE_ROW(1) STORE_ROW(2) STORE_ROW(3)
}
