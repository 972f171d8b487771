// Shared by the wide attention kernels (attn_wide_fwd, attn_wide_bwd_q,
// attn_wide_bwd_kv): blocks of 64 positions, register tiles of 4 × 4, vec4
// shared-memory reads. The tiled kernels of attn_tile.glsl (blocks of 16)
// stay for small shapes and for DUALSCOPE_ATTN=old (kernels.rs: AttnKernels::wide_for).
//
// A workgroup of 256 invocations owns a block of AW_QB = 64 positions of one
// (batch row, head); invocation l = 16·qi + ki. Tiles are 64 rows of 64 floats
// held as 16 vec4s per row, vec4 c of row j at j·16 + (c XOR (j mod 8))
// (AW_IX): 16 invocations reading vec4 c of rows j..j+15 (or vec4s 0..15 of
// one row) touch each 16-byte slot of a 128-byte bank window twice, so they
// are served in the two wavefronts that 256 bytes take; a vec4 read by 16
// invocations at once is one broadcast. (A padded pitch of 17 would do the
// same, but two such tiles pass the 32 KiB of shared memory lavapipe has.)
// Each invocation keeps 16 accumulators (4 rows × 4 columns, or 4 rows × a
// vec4 of dims), so a step of 4 dims or 4 keys costs 8 vec4 reads for 64
// multiply-adds, where the blocks of 16 took 2 reads for 4.
//
// Loops: about 16 passes per (chunk of 64 keys, chunk of 64 dims) pair in
// each phase (kernels.rs: attn_loops counts them for lavapipe's guard).
#ifndef DUALSCOPE_ATTN_WIDE_GLSL
#define DUALSCOPE_ATTN_WIDE_GLSL

#include "attn_layout.glsl"

#define AW_QB 64u  // positions per workgroup (kernels.rs: ATTN_WIDE_BLOCK)
#define AW_KC 64u  // keys (or queries) per chunk
#define AW_DC 64u  // head dims per chunk
#define AW_IX(row, c) ((row) * 16u + ((c) ^ ((row) & 7u)))

#define NEG_INF uintBitsToFloat(0xff800000u)

// Two tiles of 64 rows (a block's rows, a chunk's keys or queries, or
// weights): 32 KiB. The row reductions (64 rows × 16 partials) use the first
// 256 vec4s of tb, free between the phases that call them.
shared vec4 ta[AW_QB * 16u];
shared vec4 tb[AW_KC * 16u];

#define SYNC()             \
    memoryBarrierShared(); \
    barrier()

// Whether the rows of a tensor with row stride RS and first column CO can be
// staged as vec4 loads from column col + db on: every group of four starts on
// a multiple of 4 and none straddles the chunk's end dn. Uniform per dispatch.
bool aw_vec4(uint RS, uint CO, uint col, uint db, uint dn) {
    return RS % 4u == 0u && CO % 4u == 0u && (col + db) % 4u == 0u && dn % 4u == 0u;
}

// TILE[AW_IX(j, c)] = rows base + j (j < 64; 0 from n on) of the extended key
// axis of a carried prefix (docs/carry-state.md), dims db + 4c .. db + 4c + 3
// (0 from dn on) at column col (attn_layout.glsl): row e < P is row e of PRE
// ([P, B, A]), row e >= P row e - P of BUF. Invocation l loads vec4 l % 16 of
// rows l / 16 + 16i, all loads before any store: four vec4 loads through
// BUF##4 and PRE##4 (the same buffers as vec4s) where aw_vec4 allows for both,
// else sixteen scalar ones. The same values either way.
// Expects l, b and col in scope.
#define AW_STAGE_EXT(TILE, BUF, PRE, P, base, n, db, dn)                                  \
    if (aw_vec4(BUF##_RS, BUF##_CO, col, db, dn) && aw_vec4(PRE##_RS, PRE##_CO, col, db, dn)) { \
        vec4 w_[4];                                                                       \
        [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) {                                    \
            uint j_ = l / 16u + 16u * i_, d_ = 4u * (l % 16u);                            \
            uint e_ = (base) + j_;                                                        \
            vec4 x_ = vec4(0.0);                                                          \
            if (j_ < (n) && d_ < (dn)) {                                                  \
                x_ = e_ < (P) ? PRE##4[ATTN_AT(PRE, e_, col + (db) + d_) / 4u]            \
                              : BUF##4[ATTN_AT(BUF, e_ - (P), col + (db) + d_) / 4u];     \
            }                                                                             \
            w_[i_] = x_;                                                                  \
        }                                                                                 \
        [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) TILE[AW_IX(l / 16u + 16u * i_, l % 16u)] = w_[i_]; \
    } else {                                                                              \
        float v_[16];                                                                     \
        [[unroll]] for (uint i_ = 0u; i_ < 16u; ++i_) {                                   \
            uint j_ = l / 16u + 16u * (i_ / 4u), d_ = 4u * (l % 16u) + i_ % 4u;           \
            uint e_ = (base) + j_;                                                        \
            float w_ = 0.0;                                                               \
            if (j_ < (n) && d_ < (dn)) {                                                  \
                w_ = e_ < (P) ? PRE[ATTN_AT(PRE, e_, col + (db) + d_)]                    \
                              : BUF[ATTN_AT(BUF, e_ - (P), col + (db) + d_)];             \
            }                                                                             \
            v_[i_] = w_;                                                                  \
        }                                                                                 \
        [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) {                                    \
            TILE[AW_IX(l / 16u + 16u * i_, l % 16u)] =                                    \
                vec4(v_[4u * i_], v_[4u * i_ + 1u], v_[4u * i_ + 2u], v_[4u * i_ + 3u]);  \
        }                                                                                 \
    }

// AW_STAGE_EXT without a prefix: rows base + j of BUF.
#define AW_STAGE(TILE, BUF, base, n, db, dn) AW_STAGE_EXT(TILE, BUF, BUF, 0u, base, n, db, dn)

// acc[r][c] += Σ_d ta[row qi + 16r][d] · tb[row ki + 16c][d] over the first
// 4·n4 dims, in order of d: a 4 × 4 tile of dot products (rows × keys).
void aw_dots(inout vec4 acc[4], uint qi, uint ki, uint n4) {
    for (uint d4 = 0u; d4 < n4; ++d4) {
        vec4 a[4], k[4];
        [[unroll]] for (uint r = 0u; r < 4u; ++r) a[r] = ta[AW_IX(qi + 16u * r, d4)];
        [[unroll]] for (uint c = 0u; c < 4u; ++c) k[c] = tb[AW_IX(ki + 16u * c, d4)];
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            [[unroll]] for (uint c = 0u; c < 4u; ++c) {
                float s = acc[r][c];
                s += a[r].x * k[c].x;
                s += a[r].y * k[c].y;
                s += a[r].z * k[c].z;
                s += a[r].w * k[c].w;
                acc[r][c] = s;
            }
        }
    }
}

// acc[r] += Σ_j ta[row qi + 16r][j] · tb[row j][vec4 ki] over the first 4·n4
// columns j, in order of j: weights (rows × keys) times a tile of rows
// (keys × dims), for 4 rows and a vec4 of dims.
void aw_wsum(inout vec4 acc[4], uint qi, uint ki, uint n4) {
    for (uint j4 = 0u; j4 < n4; ++j4) {
        vec4 w[4], v[4];
        [[unroll]] for (uint r = 0u; r < 4u; ++r) w[r] = ta[AW_IX(qi + 16u * r, j4)];
        [[unroll]] for (uint i = 0u; i < 4u; ++i) v[i] = tb[AW_IX(4u * j4 + i, ki)];
        [[unroll]] for (uint r = 0u; r < 4u; ++r) {
            vec4 s = acc[r];
            s += w[r].x * v[0];
            s += w[r].y * v[1];
            s += w[r].z * v[2];
            s += w[r].w * v[3];
            acc[r] = s;
        }
    }
}

// Per-row maximum (is_max) or sum of the 16 partials of each of the 64 rows:
// invocation 16·qi + ki gives partial ki of rows qi + 16r. A fixed tree in
// shared memory (float i of the reduction is component i % 4 of tb[i / 4]),
// so the result does not depend on scheduling; every invocation gets the
// totals of its own rows. Call from uniform control flow.
#define RED(i) tb[(i) / 4u][(i) % 4u]
vec4 aw_reduce_rows(vec4 part, bool is_max) {
    uint l = gl_LocalInvocationIndex;
    uint qi = l / 16u, ki = l % 16u;
    SYNC(); // every read of tb before the reduction is done
    [[unroll]] for (uint r = 0u; r < 4u; ++r) RED((qi + 16u * r) * 16u + ki) = part[r];
    SYNC();
    uint row = l / 4u, p = l % 4u;
    for (uint s = 8u; s > 0u; s >>= 1u) {
        for (uint i = p; i < s; i += 4u) {
            float a = RED(row * 16u + i), c = RED(row * 16u + i + s);
            RED(row * 16u + i) = is_max ? max(a, c) : a + c;
        }
        SYNC();
    }
    vec4 total;
    [[unroll]] for (uint r = 0u; r < 4u; ++r) total[r] = RED((qi + 16u * r) * 16u);
    SYNC(); // tb may be written again
    return total;
}
#undef RED

#endif
