#version 450
// C[M×N] = op(A)·op(B) (or C += … with accumulate), row-major with leading
// dimensions lda, ldb, ldc and element offsets into each buffer.
//   A holds [M, K] (row i at a_off + i*lda), or [K, M] when ta != 0.
//   B holds [K, N] (row p at b_off + p*ldb), or [N, K] when tb != 0.
// Storage is f32 (the buffers are also read as vec4 below).
//
// Tiling: a workgroup of 128 threads (4 subgroups of 32 on NVIDIA) computes a
// BM×BN = 128×64 tile of C, walking K in BK = 16 slices staged through shared
// memory. Thread (tx, ty), tx < 8, ty < 16, owns an 8×8 micro-tile: rows
// 4·ty + i and 64 + 4·ty + i (i < 4), columns 4·tx + j and 32 + 4·tx + j
// (j < 4). One step of the inner loop reads four vec4 from shared memory (two
// of A, two of B) for 64 FMAs; the 32 threads of a subgroup (tx = lane % 8,
// ty = 4·subgroup + lane / 8) read 4 distinct vec4 of A and 8 of B per
// load, contiguous, so no bank conflicts.
//
// Shared memory is double-buffered: while slice s is multiplied out of one
// buffer, slice s+1 is loaded from global memory into registers, then stored
// into the other buffer; one barrier per slice. A slice's values are loaded
// four at a time along the operand's contiguous direction (K for A and for
// B^T, M for A^T, N for B): as one vec4 where the buffer's offset and leading
// dimension are multiples of 4 and all four lie inside the matrix, else as
// four scalar loads, each bounds-checked. Loads outside the matrix read zero,
// stores outside it are skipped: any M, N, K, offsets and leading dimensions
// are correct. Stores to C are vec4 where aligned likewise.
//
// Summation: each BK-slice of K is summed on its own (an FMA chain of 16 from
// zero, in k order, zero-padded past the end of K) and then added to the
// running total, so the rounding error grows like that of a blocked sum (as
// the CPU engine's) rather than a K-long chain. Every output is computed by
// exactly these operations, whatever the tiling, so the result does not
// depend on it (tests/vk_gemm.rs checks it bit for bit).
//
// Split-K: workgroup z covers k in [z·k_chunk, min(k, (z+1)·k_chunk)) and
// writes its output at c_off + z·c_stride + row·ldc + col. A product that is
// not split runs with one z and k_chunk = k. A split product (src/vk/ops.rs,
// `gemm_split`) writes S partial planes into a scratch buffer with k_chunk a
// multiple of BK, and gemm_splitk_reduce.comp adds them in a fixed order.
//
// Bias (every GEMM kernel, only on a product that is not split): with
// pc.bias = 1 + o, the row vector b[o .. o + n) of B's binding is added to
// each row of C after the product (and after the old C with accumulate),
// the same f32 addition a pass of its own would make (src/vk/gemm/record.rs,
// `gemm_bias`): the GRU's input bias, without another read and write of gi.
//
// The push-constant block is 16 × u32 = 64 bytes (src/vk/ops.rs asserts it).
//
// Shared memory: 2 × 16 × (128 + 4) + 2 × 16 × (64 + 4) floats = 25 KiB,
// within lavapipe's 32 KiB (src/vk/ops.rs, GEMM_F32.shared_bytes).
//
// ROUND_F16: round every staged input to f16 precision (the f16 precision of
// the ladder on devices without coopmat); accumulation stays f32.
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
#define THREADS 128
// Four-value groups of A and B each thread stages per slice.
#define A_LOADS (BM * BK / 4 / THREADS)
#define B_LOADS (BK * BN / 4 / THREADS)

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

// Each buffer is declared twice, as floats and as vec4 (the same binding).
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
    uint k_chunk;  // K range of one workgroup z (k for an unsplit product)
    uint c_stride; // elements between the output planes of successive z
    uint slices;   // the reduce kernel's plane count (unused here)
    uint bias;  // 0, or 1 + the offset in B's binding of a row vector added to every row of C
} pc;

#include "gemm_store.glsl"

// Buffer d, slice row p: As[d][p][0..BM/4) holds A's rows 4r..4r+3 at k p in
// one vec4 (Bs: B's columns). One vec4 of padding per row makes the scalar
// staging stores of A and B^T conflict-free (row stride ≡ 4 banks).
shared vec4 As[2][BK][BM / 4 + 1];
shared vec4 Bs[2][BK][BN / 4 + 1];

// The next slice, in registers while the current one is multiplied.
vec4 ra[A_LOADS];
vec4 rb[B_LOADS];

// Group i of this thread: its first value's place in the tile, (row, k) of A
// and (k, column) of B. The four values run along k for A and B^T (rows
// tid/2 and tid/2 + 64 of A, two threads per row, 32 contiguous bytes each),
// along the row for A^T and B (a subgroup reads 512 contiguous bytes).
uint a_row(uint tid, uint i) { return pc.ta != 0u ? 4u * ((tid + THREADS * i) % (BM / 4u)) : tid / 2u + (BM / 2u) * (i % 2u); }
uint a_k(uint tid, uint i) { return pc.ta != 0u ? (tid + THREADS * i) / (BM / 4u) : 4u * (tid % 2u) + 8u * (i / 2u); }
uint b_col(uint tid, uint i) { return pc.tb != 0u ? tid / 2u : 4u * ((tid + THREADS * i) % (BN / 4u)); }
uint b_k(uint tid, uint i) { return pc.tb != 0u ? 4u * (tid % 2u) + 8u * i : (tid + THREADS * i) / (BN / 4u); }

// Four consecutive values of A from index `at`: the j-th is inside the matrix
// when `line_ok` and run + j < run_end (run: the position along the
// contiguous direction); outside, zero. One vec4 load when `vec_ok` (the
// buffer's offset and leading dimension are multiples of 4) and all are inside.
vec4 load_a4(bool line_ok, uint at, uint run, uint run_end, bool vec_ok) {
    vec4 v = vec4(0.0);
#ifdef FAULT_NO_BOUNDS
    [[unroll]] for (uint j = 0; j < 4u; ++j) v[j] = a[min(at + j, a.length() - 1)];
#else
    if (line_ok) {
        if (vec_ok && run + 3u < run_end) {
            v = a4[at / 4u];
        } else {
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                if (run + j < run_end) v[j] = a[at + j];
            }
        }
    }
#endif
    return v;
}

vec4 load_b4(bool line_ok, uint at, uint run, uint run_end, bool vec_ok) {
    vec4 v = vec4(0.0);
#ifdef FAULT_NO_BOUNDS
    [[unroll]] for (uint j = 0; j < 4u; ++j) v[j] = b[min(at + j, b.length() - 1)];
#else
    if (line_ok) {
        if (vec_ok && run + 3u < run_end) {
            v = b4[at / 4u];
        } else {
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                if (run + j < run_end) v[j] = b[at + j];
            }
        }
    }
#endif
    return v;
}

// The slice of K at [k0, k0 + BK) ∩ [.., k_end) of the tile at (row0, col0).
// A group's first index is a multiple of 4 when the offset and the leading
// dimension are, and (for groups along K) k0 is (split ranges start at
// multiples of BK; an unsplit product at 0).
//
// A slice wholly inside both matrices, with both operands' groups aligned,
// takes the fast path: its six 16-byte loads are issued back to back, with
// selects rather than branches between them (behind a bounds check per
// load, each waited for its value before the next was issued).
#define FAST_A(i)                                                              \
    {                                                                          \
        const uint gr = row0 + a_row(tid, i), gp = k0 + a_k(tid, i);           \
        ra[i] = a4[(pc.a_off + (pc.ta != 0u ? gp * pc.lda + gr : gr * pc.lda + gp)) / 4u]; \
    }
#define FAST_B(i)                                                              \
    {                                                                          \
        const uint gq = col0 + b_col(tid, i), gp = k0 + b_k(tid, i);           \
        rb[i] = b4[(pc.b_off + (pc.tb != 0u ? gq * pc.ldb + gp : gp * pc.ldb + gq)) / 4u]; \
    }

void load_slice(uint tid, uint row0, uint col0, uint k0, uint k_end) {
    const bool k_vec = k0 % 4u == 0u;
    const bool a_vec = pc.a_off % 4u == 0u && pc.lda % 4u == 0u && (pc.ta != 0u || k_vec);
    const bool b_vec = pc.b_off % 4u == 0u && pc.ldb % 4u == 0u && (pc.tb == 0u || k_vec);
#if !defined(FAULT_NO_BOUNDS)
    if (a_vec && b_vec && row0 + BM <= pc.m && col0 + BN <= pc.n && k0 + BK <= k_end) {
        FAST_A(0u) FAST_A(1u) FAST_A(2u) FAST_A(3u)
        FAST_B(0u) FAST_B(1u)
        return;
    }
#endif
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        const uint gr = row0 + a_row(tid, i), gp = k0 + a_k(tid, i);
        if (pc.ta != 0u) {
            ra[i] = load_a4(gp < k_end, pc.a_off + gp * pc.lda + gr, gr, pc.m, a_vec);
        } else {
            ra[i] = load_a4(gr < pc.m, pc.a_off + gr * pc.lda + gp, gp, k_end, a_vec);
        }
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        const uint gq = col0 + b_col(tid, i), gp = k0 + b_k(tid, i);
        if (pc.tb != 0u) {
            rb[i] = load_b4(gq < pc.n, pc.b_off + gq * pc.ldb + gp, gp, k_end, b_vec);
        } else {
            rb[i] = load_b4(gp < k_end, pc.b_off + gp * pc.ldb + gq, gq, pc.n, b_vec);
        }
    }
}

// Group i of the registers into shared buffer d (rounded by STAGE).
void store_a(uint tid, uint d, uint i) {
    const uint r = a_row(tid, i), p = a_k(tid, i);
    const vec4 v = vec4(STAGE(ra[i].x), STAGE(ra[i].y), STAGE(ra[i].z), STAGE(ra[i].w));
    if (pc.ta != 0u) {
        As[d][p][r / 4u] = v; // four rows at one k
    } else {
        [[unroll]] for (uint j = 0; j < 4u; ++j) As[d][p + j][r / 4u][r % 4u] = v[j]; // four k of one row
    }
}

void store_b(uint tid, uint d, uint i) {
    const uint q = b_col(tid, i), p = b_k(tid, i);
    const vec4 v = vec4(STAGE(rb[i].x), STAGE(rb[i].y), STAGE(rb[i].z), STAGE(rb[i].w));
    if (pc.tb != 0u) {
        [[unroll]] for (uint j = 0; j < 4u; ++j) Bs[d][p + j][q / 4u][q % 4u] = v[j]; // four k of one column
    } else {
        Bs[d][p][q / 4u] = v; // four columns at one k
    }
}

// Written out rather than looped: spirv-opt leaves some of these loops rolled,
// and a rolled loop indexes ra/rb dynamically (local memory on some drivers).
void store_slice(uint tid, uint d) {
#if A_LOADS != 4 || B_LOADS != 2
#error store_slice stores 4 groups of A and 2 of B
#endif
    store_a(tid, d, 0u);
    store_a(tid, d, 1u);
    store_a(tid, d, 2u);
    store_a(tid, d, 3u);
    store_b(tid, d, 0u);
    store_b(tid, d, 1u);
}

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const uint lane = tid % 32u;
    const uint tx = lane % 8u;
    const uint ty = 4u * (tid / 32u) + lane / 8u;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint k_range = min(pc.k, z * pc.k_chunk);
    const uint k_end = min(pc.k, k_range + pc.k_chunk);
#ifdef FAULT_SKIP_FIRST_SLICE
    // FAULT_SKIP_FIRST_SLICE: the K loop starts one slice late (an off-by-one
    // in its bounds): the first BK terms of each workgroup's K range are lost.
    const uint k_begin = min(k_end, k_range + BK);
#else
    const uint k_begin = k_range;
#endif
    const uint slices = (k_end - k_begin + BK - 1u) / BK;

    // acc[2·i + h]: row i of the micro-tile (4·ty + i, then 64 + 4·ty + i - 4),
    // columns 4·tx + 32·h + j.
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
            const vec4 a0 = As[d][p][ty];
            const vec4 a1 = As[d][p][BM / 8u + ty];
            const vec4 b0 = Bs[d][p][tx];
            const vec4 b1 = Bs[d][p][BN / 8u + tx];
            [[unroll]] for (uint i = 0; i < 4u; ++i) {
                part[2u * i] = ACC(fma(vec4(a0[i]), b0, part[2u * i]));
                part[2u * i + 1u] = ACC(fma(vec4(a0[i]), b1, part[2u * i + 1u]));
                part[8u + 2u * i] = ACC(fma(vec4(a1[i]), b0, part[8u + 2u * i]));
                part[9u + 2u * i] = ACC(fma(vec4(a1[i]), b1, part[9u + 2u * i]));
            }
        }
        [[unroll]] for (uint i = 0; i < 16u; ++i) acc[i] = ACC(acc[i] + part[i]);

        // The other buffer was last read in slice s-1, before the barrier
        // that ended it; the barrier below publishes it for slice s+1.
        if (more) store_slice(tid, 1u - d);
        barrier();
    }

    store_c(acc, row0, col0, z, tx, ty);
}
