// Shared by the tiled attention kernels (attn_fwd, attn_bwd_q, attn_bwd_kv):
// the tile sizes, the shared-memory tiles and the fixed-order row reductions.
//
// A workgroup of 256 invocations owns a block of ATTN_QB = 16 positions of one
// (batch row, head) (queries in attn_fwd and attn_bwd_q, keys in attn_bwd_kv;
// src/vk/engine/kernels.rs dispatches one workgroup per block). Invocation
// l = 64·g + x works for the block's positions g, g+4, g+8, g+12: the four
// components r of its vec4s are position g + 4r. x is a key of the current
// chunk (dot-product phases) or a head dim of the current dim chunk (weighted
// sums).
//
// Loops are short: about 40 iterations per invocation for each (key chunk,
// dim chunk) pair, about 11000 in all at W = 4096, dh = 256, so lavapipe's
// guard (it stops any loop after 65535 iterations in total per invocation) is
// far off for any window and head width the model uses.
#ifndef DUALSCOPE_ATTN_TILE_GLSL
#define DUALSCOPE_ATTN_TILE_GLSL

#include "attn_layout.glsl"

#define ATTN_QB 16u      // positions per workgroup (kernels.rs: ATTN_BLOCK)
#define ATTN_KC 64u      // keys (or queries) per chunk
#define ATTN_DC 64u      // head dims per chunk
#define ATTN_KPITCH 65u  // odd row pitch of rows staged for dot products: no bank conflicts

#define NEG_INF uintBitsToFloat(0xff800000u)

// The block's 16 rows of the broadcast operand, a vec4 of rows g, g+4, g+8,
// g+12 per index x (a head dim, or a key of the chunk): at [g][x] (index
// 64·g + x) or [x][g] (4·x + g), whichever the kernel stages without bank
// conflicts. Every invocation of a subgroup of 32 has the same g and reads the
// same x, so a read is one broadcast.
shared vec4 rows4[ATTN_DC * 4u];
// A chunk of rows of the other operand: [x][d] with pitch ATTN_KPITCH (read
// across x, for dot products) or ATTN_DC (read across d, for weighted sums).
shared float tileb[ATTN_KC * ATTN_KPITCH];
// Row reductions: 16 rows × 64 partials.
shared float red[ATTN_QB * 64u];

#define SYNC()                 \
    memoryBarrierShared();     \
    barrier()

// The staging macros read BUF at (position, row b, column
// col + dim) and expect g = l / 64, x = l % 64, b and col in scope. Each
// invocation issues all its loads before its first store, so that they are in
// flight together (GL_EXT_control_flow_attributes: the including shader
// enables it).

// tileb[j·PITCH + d] = BUF row base + j, dim db + d, for j < 64, d < 64 (0 past
// n rows or dn dims): invocation (g, x) loads dim x of rows g + 4i.
#define STAGE_TILE(BUF, base, n, db, dn, PITCH)                                              \
    {                                                                                        \
        float v_[16];                                                                        \
        [[unroll]] for (uint i_ = 0u; i_ < 16u; ++i_) {                                      \
            uint j_ = g + 4u * i_;                                                           \
            v_[i_] = j_ < (n) && x < (dn) ? BUF[ATTN_AT(BUF, (base) + j_, col + (db) + x)] : 0.0; \
        }                                                                                    \
        [[unroll]] for (uint i_ = 0u; i_ < 16u; ++i_) tileb[(g + 4u * i_) * (PITCH) + x] = v_[i_]; \
    }

// STAGE_TILE on the extended key axis of a carried prefix (docs/carry-state.md):
// row e < P of the axis is row e of PRE ([P, B, A]), row e >= P is row e - P of
// BUF. With P = 0 it is STAGE_TILE exactly.
#define STAGE_TILE_EXT(BUF, PRE, P, base, n, db, dn, PITCH)                                  \
    {                                                                                        \
        float v_[16];                                                                        \
        [[unroll]] for (uint i_ = 0u; i_ < 16u; ++i_) {                                      \
            uint j_ = g + 4u * i_, e_ = (base) + j_;                                         \
            float w_ = 0.0;                                                                  \
            if (j_ < (n) && x < (dn)) {                                                      \
                w_ = e_ < (P) ? PRE[ATTN_AT(PRE, e_, col + (db) + x)]                 \
                              : BUF[ATTN_AT(BUF, e_ - (P), col + (db) + x)];       \
            }                                                                                \
            v_[i_] = w_;                                                                     \
        }                                                                                    \
        [[unroll]] for (uint i_ = 0u; i_ < 16u; ++i_) tileb[(g + 4u * i_) * (PITCH) + x] = v_[i_]; \
    }

// rows4[g][d] = BUF rows t0 + g + 4i (i = 0..3; 0 from t1 on), dim db + d, for
// d < 64 (0 past dn): the block's 16 rows, one vec4 per invocation.
#define STAGE_BLOCK(BUF, t0, t1, db, dn)                                                     \
    {                                                                                        \
        vec4 v_;                                                                             \
        [[unroll]] for (uint i_ = 0u; i_ < 4u; ++i_) {                                       \
            uint t_ = (t0) + g + 4u * i_;                                                    \
            v_[i_] = t_ < (t1) && x < (dn) ? BUF[ATTN_AT(BUF, t_, col + (db) + x)] : 0.0; \
        }                                                                                    \
        rows4[g * ATTN_DC + x] = v_;                                                         \
    }

// acc[r] += Σ_{x < n} rows4[ra + x·rs][r] · tileb[base + x·stride], in order of x.
vec4 mac_rows(vec4 acc, uint ra, uint rs, uint base, uint stride, uint n) {
    uint x = 0u;
    for (; x + 4u <= n; x += 4u) {
        uint o = base + x * stride, p = ra + x * rs;
        acc += rows4[p] * tileb[o];
        acc += rows4[p + rs] * tileb[o + stride];
        acc += rows4[p + 2u * rs] * tileb[o + 2u * stride];
        acc += rows4[p + 3u * rs] * tileb[o + 3u * stride];
    }
    for (; x < n; ++x) acc += rows4[ra + x * rs] * tileb[base + x * stride];
    return acc;
}

// Per-row maximum (is_max) or sum of the 64 partials of each of the 16 rows:
// invocation 64·g + x gives partial x of rows g + 4r. A fixed tree in shared
// memory, so the result does not depend on scheduling; every invocation gets
// the totals of its own rows. Call from uniform control flow.
vec4 reduce_rows(vec4 part, bool is_max) {
    uint l = gl_LocalInvocationIndex;
    uint g = l / 64u, x = l % 64u;
    for (uint r = 0u; r < 4u; ++r) red[(g + 4u * r) * 64u + x] = part[r];
    SYNC();
    uint row = l / 16u, p = l % 16u;
    for (uint s = 32u; s > 0u; s >>= 1u) {
        for (uint i = p; i < s; i += 16u) {
            float a = red[row * 64u + i], b = red[row * 64u + i + s];
            red[row * 64u + i] = is_max ? max(a, b) : a + b;
        }
        SYNC();
    }
    vec4 total;
    for (uint r = 0u; r < 4u; ++r) total[r] = red[(g + 4u * r) * 64u];
    SYNC(); // `red` may be written again by the next reduction
    return total;
}

#endif
