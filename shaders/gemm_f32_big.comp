#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate), f32, on 128×128 tiles:
// the f32 step's kernel on GPUs (`GemmPath::TiledF32Big`). Same operands,
// push constants, split-K and summation as gemm_f32.comp (read it first):
//   A holds [M, K] (row i at a_off + i*lda), or [K, M] when ta != 0.
//   B holds [K, N] (row p at b_off + p*ldb), or [N, K] when tb != 0.
//
// Tiling: a workgroup of 256 threads (8 subgroups of 32 on NVIDIA) computes a
// BM×BN = 128×128 tile of C, walking K in BK = 16 slices. Thread (tx, ty),
// tx, ty < 16, owns an 8×8 micro-tile as 2×2 blocks of 4×4: rows 4·ty + i and
// 64 + 4·ty + i, columns 4·tx + j and 64 + 4·tx + j (i, j < 4). A subgroup is
// 8 tx × 4 ty, so each of its four vec4 shared-memory reads per k touches 8
// (B) or 4 (A) contiguous vec4: one pass each, no conflicts. Against the
// 128×64 kernel: twice the FMAs per staged value (a third less L2 traffic per
// FMA), and per thread and slice 4 global loads (not 6) for the same 1024 FMAs.
//
// Shared memory: A and B slices of 16 × 128 floats, double-buffered, with no
// padding: exactly 32 KiB (lavapipe's limit). The scalar staging stores (A
// with ta == 0, B with tb != 0: four k of one row) would then meet two threads
// per bank; instead the vec4 slot of a row at k = p is swizzled, slot v stored
// at v ^ (p & 4), which sends the odd threads' rows to the other half of the
// banks. The inner loop's reads permute within aligned groups of 8 slots, so
// they stay contiguous.
//
// Per slice: the next slice's 4 vec4 are loaded into registers before the
// current slice's FMAs, stored into the other buffer after them, one barrier.
// A slice wholly inside both matrices with aligned operands takes the fast
// path (4 loads back to back behind one uniform check, as gemm_f32.comp).
//
// Registers per thread: 64 accumulators + 64 for the slice's partial sums
// (the blocked summation below needs both), 16 of prefetch, 16 of operands,
// plus addresses: about 170, so one workgroup (8 subgroups) per SM.
//
// Summation: exactly gemm_f32.comp's (each BK-slice summed by an FMA chain of
// 16 from zero in k order, zero-padded, then added to the running total), so
// both kernels give the same bits for an unsplit product; a split product
// differs only where the split does (split.rs plans it on this tile).
//
// Split-K: workgroup z covers k in [z·k_chunk, min(k, (z+1)·k_chunk)) and
// writes at c_off + z·c_stride + row·ldc + col (k_chunk a multiple of BK).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define BM 128
#define BN 128
#define BK 16
#define THREADS 256
// Four-value groups of A (and of B) each thread stages per slice.
#define LOADS (BM * BK / 4 / THREADS)
#if LOADS != 2 || BM != BN
#error the staging below is written for two groups per operand and square tiles
#endif

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer ABuf { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer ABuf4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer BBuf4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) buffer CBuf { float c[]; };
layout(std430, set = 0, binding = 2) buffer CBuf4 { vec4 c4[]; };

layout(push_constant) uniform Push {
    uint m; uint n; uint k;
    uint lda; uint ldb; uint ldc;
    uint a_off; uint b_off; uint c_off;
    uint ta; uint tb; uint accumulate;
    uint k_chunk;
    uint c_stride;
    uint slices;
    uint bias;  // 0, or 1 + the offset in B's binding of a row vector added to every row of C
} pc;

#include "gemm_store.glsl"

// Buffer d, slice row p: As[d][p][v ^ (p & 4)] holds A's rows 4v..4v+3 at k p
// (Bs: B's columns 4v..4v+3).
shared vec4 As[2][BK][BM / 4];
shared vec4 Bs[2][BK][BN / 4];

uint slot(uint v, uint p) { return v ^ (p & 4u); }

vec4 ra[LOADS];
vec4 rb[LOADS];

// Group i of this thread, for an operand whose four values run along k
// (A, B^T): row (or column) tid/2 of the tile, k 4·(tid%2 + 2i); two threads
// read 32 contiguous bytes of a row. Along the tile's rows or columns (A^T,
// B): k (tid + 256 i)/32, four rows from 4·(tid % 32); a subgroup reads 512
// contiguous bytes.
uint g_mn(bool along_k, uint tid, uint i) { return along_k ? tid / 2u : 4u * (tid % 32u); }
uint g_k(bool along_k, uint tid, uint i) { return along_k ? 4u * (tid % 2u + 2u * i) : (tid + THREADS * i) / 32u; }

// Four consecutive values from index `at` of A (B below): the j-th inside the
// matrix when `line_ok` and run + j < run_end, else zero; one vec4 load when
// `vec_ok` and all four are inside.
vec4 load_a4(bool line_ok, uint at, uint run, uint run_end, bool vec_ok) {
    vec4 v = vec4(0.0);
    if (line_ok) {
        if (vec_ok && run + 3u < run_end) {
            v = a4[at / 4u];
        } else {
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                if (run + j < run_end) v[j] = a[at + j];
            }
        }
    }
    return v;
}

vec4 load_b4(bool line_ok, uint at, uint run, uint run_end, bool vec_ok) {
    vec4 v = vec4(0.0);
    if (line_ok) {
        if (vec_ok && run + 3u < run_end) {
            v = b4[at / 4u];
        } else {
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                if (run + j < run_end) v[j] = b[at + j];
            }
        }
    }
    return v;
}

#define FAST_A(i)                                                                          \
    {                                                                                      \
        const uint gr = row0 + g_mn(a_k, tid, i), gp = k0 + g_k(a_k, tid, i);              \
        ra[i] = a4[(pc.a_off + (a_k ? gr * pc.lda + gp : gp * pc.lda + gr)) / 4u];         \
    }
#define FAST_B(i)                                                                          \
    {                                                                                      \
        const uint gq = col0 + g_mn(b_k, tid, i), gp = k0 + g_k(b_k, tid, i);              \
        rb[i] = b4[(pc.b_off + (b_k ? gq * pc.ldb + gp : gp * pc.ldb + gq)) / 4u];         \
    }

// The slice of K at [k0, k0 + BK) ∩ [.., k_end) of the tile at (row0, col0)
// into ra, rb.
void load_slice(uint tid, uint row0, uint col0, uint k0, uint k_end) {
    const bool a_k = pc.ta == 0u, b_k = pc.tb != 0u;
    const bool k_vec = k0 % 4u == 0u;
    const bool a_vec = pc.a_off % 4u == 0u && pc.lda % 4u == 0u && (!a_k || k_vec);
    const bool b_vec = pc.b_off % 4u == 0u && pc.ldb % 4u == 0u && (!b_k || k_vec);
    if (a_vec && b_vec && row0 + BM <= pc.m && col0 + BN <= pc.n && k0 + BK <= k_end) {
        FAST_A(0u) FAST_A(1u)
        FAST_B(0u) FAST_B(1u)
        return;
    }
    [[unroll]] for (uint i = 0; i < LOADS; ++i) {
        const uint gr = row0 + g_mn(a_k, tid, i), gp = k0 + g_k(a_k, tid, i);
        if (a_k) {
            ra[i] = load_a4(gr < pc.m, pc.a_off + gr * pc.lda + gp, gp, k_end, a_vec);
        } else {
            ra[i] = load_a4(gp < k_end, pc.a_off + gp * pc.lda + gr, gr, pc.m, a_vec);
        }
    }
    [[unroll]] for (uint i = 0; i < LOADS; ++i) {
        const uint gq = col0 + g_mn(b_k, tid, i), gp = k0 + g_k(b_k, tid, i);
        if (b_k) {
            rb[i] = load_b4(gq < pc.n, pc.b_off + gq * pc.ldb + gp, gp, k_end, b_vec);
        } else {
            rb[i] = load_b4(gp < k_end, pc.b_off + gp * pc.ldb + gq, gq, pc.n, b_vec);
        }
    }
}

// Group i of the registers into shared buffer d: four k of one row (scalar
// stores, swizzled per k) or four rows at one k (one vec4).
void store_a(uint tid, uint d, uint i) {
    const bool a_k = pc.ta == 0u;
    const uint r = g_mn(a_k, tid, i), p = g_k(a_k, tid, i);
    if (a_k) {
        [[unroll]] for (uint j = 0; j < 4u; ++j) As[d][p + j][slot(r / 4u, p + j)][r % 4u] = ra[i][j];
    } else {
        As[d][p][slot(r / 4u, p)] = ra[i];
    }
}

void store_b(uint tid, uint d, uint i) {
    const bool b_k = pc.tb != 0u;
    const uint q = g_mn(b_k, tid, i), p = g_k(b_k, tid, i);
    if (b_k) {
        [[unroll]] for (uint j = 0; j < 4u; ++j) Bs[d][p + j][slot(q / 4u, p + j)][q % 4u] = rb[i][j];
    } else {
        Bs[d][p][slot(q / 4u, p)] = rb[i];
    }
}

// Written out: a rolled loop would index ra/rb dynamically.
void store_slice(uint tid, uint d) {
    store_a(tid, d, 0u);
    store_a(tid, d, 1u);
    store_b(tid, d, 0u);
    store_b(tid, d, 1u);
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint lane = tid % 32u;
    const uint sg = tid / 32u;
    const uint tx = lane % 8u + 8u * (sg % 2u);
    const uint ty = lane / 8u + 4u * (sg / 2u);
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint k_begin = min(pc.k, z * pc.k_chunk);
    const uint k_end = min(pc.k, k_begin + pc.k_chunk);
    const uint slices = (k_end - k_begin + BK - 1u) / BK;
    // The inner loop's four slots at k with p & 4 == 0 and their swizzled
    // twins at p & 4 == 4 (ty, tx < 16: the XOR stays in the same half).
    const uint ya = ty, yb = BM / 8u + ty, xa = tx, xb = BN / 8u + tx;

    // acc[2·i + h]: row 4·ty + i (i < 4) or 64 + 4·ty + i - 4 (i ≥ 4),
    // columns 4·tx + 64·h + j.
    vec4 acc[16];
    [[unroll]] for (uint i = 0; i < 16u; ++i) acc[i] = vec4(0.0);

    if (slices > 0u) {
        load_slice(tid, row0, col0, k_begin, k_end);
        store_slice(tid, 0u);
    }
    barrier();
    for (uint s = 0u; s < slices; ++s) {
        const uint d = s % 2u;
        const bool more = s + 1u < slices;
        if (more) load_slice(tid, row0, col0, k_begin + (s + 1u) * BK, k_end);

        vec4 part[16];
        [[unroll]] for (uint i = 0; i < 16u; ++i) part[i] = vec4(0.0);
        [[unroll]] for (uint p = 0; p < BK; ++p) {
            const vec4 a0 = As[d][p][slot(ya, p)];
            const vec4 a1 = As[d][p][slot(yb, p)];
            const vec4 b0 = Bs[d][p][slot(xa, p)];
            const vec4 b1 = Bs[d][p][slot(xb, p)];
            [[unroll]] for (uint i = 0; i < 4u; ++i) {
                part[2u * i] = fma(vec4(a0[i]), b0, part[2u * i]);
                part[2u * i + 1u] = fma(vec4(a0[i]), b1, part[2u * i + 1u]);
                part[8u + 2u * i] = fma(vec4(a1[i]), b0, part[8u + 2u * i]);
                part[9u + 2u * i] = fma(vec4(a1[i]), b1, part[9u + 2u * i]);
            }
        }
        [[unroll]] for (uint i = 0; i < 16u; ++i) acc[i] += part[i];

        // The other buffer was last read in slice s-1, before the barrier
        // that ended it; the barrier below publishes it for slice s+1.
        if (more) store_slice(tid, 1u - d);
        barrier();
    }

    store_c(acc, row0, col0, z, tx, ty);
}
