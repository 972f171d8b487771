#version 450
// Backpropagation through time for both layers of a two-layer GRU in one
// dispatch, as a wavefront: in interval i, layer 1 computes step t = T-1-i
// and layer 0 step t = T+1-i, so the two layers take T + 2 dependent
// intervals instead of 2T. Layer 0's gradient from above, d_h0[t] =
// d_gi1[t] · W_ih1 (layer 1's input gradient), is computed here (not by a
// GEMM afterwards) and written to d_h0, its K range (the 3H gate columns)
// split between the layers so that every workgroup has the same work:
//   - interval i-1: layer 1 computes step t = T-i and writes d_gi1[t];
//   - interval i: layer 1 multiplies the first half of d_gi1[t]'s K-tiles
//     and writes that partial sum into d_h0[t];
//   - interval i+1: layer 0 adds the second half's product to it, and runs
//     its step t with the sum.
//
// Workgroups 0 .. G-1 run layer 0 and G .. 2G-1 layer 1 (G = RB · H/16,
// RB = ceil(B/16)), each owning 16 rows × 16 units with its weight columns in
// registers as f16 cooperative-matrix fragments. Every subgroup ss of 8 takes
// two products, f16 × f16 → f32:
//   - R, the recurrent one, d_gh[t+1] · W_hh[:, units]: K-tiles ss + 8i of 3H/16;
//   - A, its part of the one from above, d_gi1 · W_ih1[:, units]: K-tiles
//     ss + 8i of the first half (layer 1) or of the second (layer 0).
// At H = 512 that is 12 + 6 tiles per subgroup in both layers (before: layer
// 0's subgroups took 24, layer 1's 12). The f16 copies (d_gh0s, d_gh1s,
// d_gi1s; 16 rows of padding past T·B) are what the products read, all of a
// step's loads issued at once, staged through shared memory in rounds of 6
// tiles. Everything stored besides them is f32, as gru_bwd_grid writes it.
//
// The dispatch walks intervals pc.t .. pc.t + pc.n - 1 with a barrier of
// include/grid.glsl between them (pc.n = 1: one dispatch per interval) that
// waits only for the workgroups whose values the next interval reads: layer
// 1 for layer 1's of its row block, layer 0 for both layers' of it
// (grid_sync_rows; layer 1 may run ahead of layer 0). Needs subgroup size 32, H % 16 == 0, H <= 512, all workgroups
// resident at once (the engine checks).
// Parameter offsets: W_hh0 pc.off0, W_hh1 pc.off1, W_ih1 pc.off2.
//
// OPERANDS_NONCOHERENT (the variant gru_bwd_wave_cm_nc): the products' loads
// of d_gh0s, d_gh1s, d_gi1s without `coherent`, so that they may be served
// through the SM's L1. Only for H % 64 == 0 (Engine::wave_noncoherent): a
// row (3H halves) is then whole 128-byte cache lines, and a workgroup reads
// only rows of the step it reads (rows past B in a partial row block are not
// loaded), written and made available by the workgroups it waited for at the
// last barrier; so no line a load brings into L1 was there before its final
// value. (d_h0's
// partial sums are read `coherent`.)
// FMA_PRODUCTS (the variant gru_bwd_wave_fma_nc, for a few rows, with
// OPERANDS_NONCOHERENT): the same products as f32 FMAs of the f16 values
// instead of cooperative matrices, for rows < B only, straight from the loads
// without staging. Lane 8·tg + cg of a subgroup takes units 2cg, 2cg + 1 and
// the subgroup's tiles q = tg + 4i (i < 3: R's, the others A's), its weights
// in registers as f16 pairs of the two units; two shuffles sum the four
// lanes of a unit, and the partial sums go to `part` as the fragments do.
// pc.flag (include/probe_bits.glsl): PROBE_BARRIERS_ONLY, no arithmetic,
// only pc.n - 1 grid barriers (the residency check). The lab's timing probes
// (Engine::probe_bwd_wave; what they write is meaningless): the products'
// operands not loaded (zeros), no products, nothing stored after the
// products, the step's own inputs not loaded (PROBE_NO_OPERAND_LOADS,
// PROBE_NO_PRODUCTS, PROBE_NO_STORES, PROBE_NO_STEP_INPUTS). Only in the
// variant built with WAVE_PROBE (gru_bwd_wave_cm_nc_probe), the products'
// own parts: no staging (the operands' stores to `stg` and the subgroup
// barriers), no fragment loads from `stg` (zero fragments), no
// multiply-adds, no fragment stores to `part`, the operand fragments loaded
// straight from the f16 copies (no staging; valid only for full row
// blocks), and with PROBE_NO_PRODUCTS the operands' loads alone (each
// waited for, nothing multiplied): PROBE_NO_STAGING, PROBE_NO_FRAG_LOADS,
// PROBE_NO_MMA, PROBE_NO_FRAG_STORES, PROBE_DIRECT_OPERAND_LOADS,
// PROBE_OPERAND_LOADS_ONLY.
#extension GL_GOOGLE_include_directive : enable
#ifndef FMA_PRODUCTS
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
#include "probe_bits.glsl"

#define SUBGROUPS 8u
// K-tiles per subgroup at most (H <= 512: 3H/16 <= 96): of R 96/8, of A 48/8.
#define KR_MAX 12
#define KA_MAX 6
#define KQ (KR_MAX + KA_MAX)
// Tiles staged per subgroup at once, and the rounds of a step.
#define KT_STAGE 6
#define ROUNDS (KQ / KT_STAGE)
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh0 { float gh0[]; };
layout(std430, binding = 2) readonly buffer Gates0 { float gates0[]; };
layout(std430, binding = 3) readonly buffer H0 { float h0[]; };
layout(std430, binding = 4) coherent buffer Dh0 { float d_h0[]; };
layout(std430, binding = 5) buffer DhTot0 { float dh_tot0[]; };
layout(std430, binding = 6) writeonly buffer Dgi0 { float d_gi0[]; };
layout(std430, binding = 7) writeonly buffer Dgh0 { float d_gh0[]; };
#define GRID_STATE_BINDING 8
#define GRID_SYNC_BINDING 9
#include "grid.glsl"
layout(std430, binding = 10) coherent buffer Dgh0s { float16_t d_gh0s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 10) readonly buffer Dgh0v { uvec4 d_gh0v[]; };
#else
layout(std430, binding = 10) coherent buffer Dgh0v { uvec4 d_gh0v[]; };
#endif
layout(std430, binding = 11) readonly buffer Gh1 { float gh1[]; };
layout(std430, binding = 12) readonly buffer Gates1 { float gates1[]; };
layout(std430, binding = 13) readonly buffer H1 { float h1[]; };
layout(std430, binding = 14) readonly buffer Dh1 { float d_h1[]; };
layout(std430, binding = 15) buffer DhTot1 { float dh_tot1[]; };
layout(std430, binding = 16) writeonly buffer Dgi1 { float d_gi1[]; };
layout(std430, binding = 17) writeonly buffer Dgh1 { float d_gh1[]; };
layout(std430, binding = 18) coherent buffer Dgh1s { float16_t d_gh1s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 18) readonly buffer Dgh1v { uvec4 d_gh1v[]; };
#else
layout(std430, binding = 18) coherent buffer Dgh1v { uvec4 d_gh1v[]; };
#endif
layout(std430, binding = 19) coherent buffer Dgi1s { float16_t d_gi1s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 19) readonly buffer Dgi1v { uvec4 d_gi1v[]; };
#else
layout(std430, binding = 19) coherent buffer Dgi1v { uvec4 d_gi1v[]; };
#endif

// Each subgroup's staging: first its weight tiles on their way into
// registers ([16 k][16 units], 2 uvec4 per row, 32 per tile), then its tiles
// of d_gh / d_gi on their way into fragments ([16 rows × 16], 32 per tile).
shared uvec4 stg[SUBGROUPS * KT_STAGE * 32u];
// Each subgroup's partial sums of the interval, R then A: [2][subgroup][row][unit].
shared float part[2u * SUBGROUPS * 16u * 16u];

#ifndef FMA_PRODUCTS
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif
// The FMA variant's tiles a lane takes at most (KQ over 4 lanes).
#define SC_Q 5

#ifdef WAVE_PROBE
// A statement the product's switches may skip (in the step's kernels, always run).
#define IF_PROBE(c) if (c)
#define AND_PROBE(c) && (c)
#else
#define IF_PROBE(c)
#define AND_PROBE(c)
#endif
// Fragment ga of the operand tile staged at stg slot i, whose first element
// in the f16 copy `src` is e (the probe's straight loads read it there).
#ifdef WAVE_PROBE
#define LOAD_A(ga, src, e, i)                                                                          \
    ga = FRAG_A(float16_t(0.0));                                                                       \
    if (direct) {                                                                                      \
        if ((src) == 0u) coopMatLoad(ga, d_gh0v, (e) >> 3, H3 / 8u, gl_CooperativeMatrixLayoutRowMajor); \
        else if ((src) == 1u) coopMatLoad(ga, d_gh1v, (e) >> 3, H3 / 8u, gl_CooperativeMatrixLayoutRowMajor); \
        else coopMatLoad(ga, d_gi1v, (e) >> 3, H3 / 8u, gl_CooperativeMatrixLayoutRowMajor);          \
    } else if (frag_loads)                                                                             \
        coopMatLoad(ga, stg, sbase + (i) * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor)
#else
#define LOAD_A(ga, src, e, i) coopMatLoad(ga, stg, sbase + (i) * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor)
#endif

// 8 values of the f16 copy `src` (0: d_gh0, 1: d_gh1, 2: d_gi1) at index i.
uvec4 load8(uint src, uint i) {
    return src == 0u ? d_gh0v[i >> 3] : (src == 1u ? d_gh1v[i >> 3] : d_gi1v[i >> 3]);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint rb_count = (pc.B + 15u) / 16u;
    uint groups = rb_count * (H / 16u);
    uint layer = gl_WorkGroupID.x / groups;
    uint local_id = gl_WorkGroupID.x - layer * groups;
    uint rb = local_id % rb_count;
    uint j0 = (local_id / rb_count) * 16u;
    uint ktiles = H3 / 16u;
    // A's K-tiles: layer 1 [0, ka_split), layer 0 [ka_split, ktiles).
    uint ka_split = ktiles / 2u;
    uint ka0 = layer == 1u ? 0u : ka_split;
    uint ka1 = layer == 1u ? ka_split : ktiles;
    uint woff_r = layer == 1u ? pc.off1 : pc.off0;
    uint src_r = layer == 1u ? 1u : 0u;

    // Tile q of this subgroup: q < KR_MAX is R's K-tile sg + 8q, the others
    // A's K-tile ka0 + sg + 8(q - KR_MAX); valid inside their ranges.
#ifdef FMA_PRODUCTS
    // This lane's weights: wk[i][k] packs units 2cg, 2cg + 1 at row k of
    // tile q = tg + 4i (zero where the tile is not valid).
    uint tg = lane / 8u, cg = lane % 8u;
    uint wk[SC_Q][16];
    [[unroll]] for (uint i = 0u; i < SC_Q; ++i) {
        uint q = tg + 4u * i;
        bool is_r = i < 3u;
        uint kt = is_r ? sg + SUBGROUPS * q : ka0 + sg + SUBGROUPS * (q - KR_MAX);
        bool valid = q < KQ && kt < (is_r ? ktiles : ka1);
        uint src = (is_r ? woff_r : pc.off2) + kt * 16u * H + j0 + 2u * cg;
        [[unroll]] for (uint k = 0u; k < 16u; ++k) {
            wk[i][k] = 0u;
            if (valid) wk[i][k] = packFloat2x16(f16vec2(p[src + k * H], p[src + k * H + 1u]));
        }
    }
#else
    uint sbase = sg * KT_STAGE * 32u;
    FRAG_B wb[KQ];
    [[unroll]] for (uint q = 0u; q < KQ; ++q) {
        bool is_r = q < KR_MAX;
        uint kt = is_r ? sg + SUBGROUPS * q : ka0 + sg + SUBGROUPS * (q - KR_MAX);
        bool valid = kt < (is_r ? ktiles : ka1);
        uint woff = is_r ? woff_r : pc.off2;
        {
            uint e = lane;
            uint m = kt * 16u + e / 2u, u0 = (e & 1u) * 8u;
            uint w[4];
            [[unroll]] for (uint x = 0u; x < 4u; ++x) {
                uint ja = j0 + u0 + 2u * x;
                float a = valid && ja < H ? p[woff + m * H + ja] : 0.0;
                float b = valid && ja + 1u < H ? p[woff + m * H + ja + 1u] : 0.0;
                w[x] = packFloat2x16(f16vec2(a, b));
            }
            stg[sbase + e] = uvec4(w[0], w[1], w[2], w[3]);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        coopMatLoad(wb[q], stg, sbase, 2u, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
    }

#endif
    if (pc.flag == PROBE_BARRIERS_ONLY) {
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    uint bl = lid / 16u, u = lid % 16u;
    uint b = rb * 16u + bl, j = j0 + u;
    bool mine = b < pc.B && j < H;
    uint rh = pc.T * pc.B * H;
    // The step of interval it: layer 1 t = T-1-it, layer 0 t = T+1-it.
    uint lag = layer == 0u ? 2u : 0u;
    float dh_next = 0.0;
    {
        uint t = pc.T - 1u + lag - pc.t;
        if (mine && pc.t >= lag && t + 1u < pc.T) {
            uint x = ((t + 1u) * pc.B + b) * H + j;
            dh_next = layer == 0u ? dh_tot0[x] : dh_tot1[x];
        }
    }
    for (uint it = pc.t; it < pc.t + pc.n; ++it) {
        bool on_step = it >= lag && it - lag < pc.T;
        uint t = pc.T - 1u + lag - it;
        bool above = t + 1u < pc.T;
        // A's step: layer 0 its own, layer 1 the one it finished last
        // interval (T - it, for 1 <= it <= T).
        bool a_on = layer == 0u ? on_step : (it >= 1u && it <= pc.T);
        uint ta = layer == 0u ? t : pc.T - it;
        bool r_on = on_step && above;
        uint row = t * pc.B + b;
        uint x = row * H + j;
        // The step's own inputs, loaded before the barrier.
        float v_dh = 0.0, v_r = 0.0, v_z = 0.0, v_n = 0.0, v_hp = 0.0, v_ghn = 0.0, v_znext = 0.0;
        if (on_step && mine && (pc.flag & PROBE_NO_STEP_INPUTS) == 0u) {
            if (layer == 0u) {
                v_r = gates0[x];
                v_z = gates0[rh + x];
                v_n = gates0[2u * rh + x];
                v_hp = t > 0u ? h0[x - pc.B * H] : 0.0;
                v_ghn = gh0[row * H3 + 2u * H + j];
                v_znext = above ? gates0[rh + x + pc.B * H] : 0.0;
            } else {
                v_dh = d_h1[x];
                v_r = gates1[x];
                v_z = gates1[rh + x];
                v_n = gates1[2u * rh + x];
                v_hp = t > 0u ? h1[x - pc.B * H] : 0.0;
                v_ghn = gh1[row * H3 + 2u * H + j];
                v_znext = above ? gates1[rh + x + pc.B * H] : 0.0;
            }
        }
        // Layer 1 reads d_gh1, d_gi1 of its row block; layer 0 d_gh0 and
        // what layer 1 wrote for it (d_h0, d_gi1).
        if (it > pc.t) grid_sync_rows(it - pc.t, layer, 2u - layer, rb, rb_count, H / 16u, groups);
        if (!on_step && !a_on) continue;
        // Layer 1's partial sum of d_h0[t], written last interval.
        if (layer == 0u && mine && on_step) v_dh = d_h0[x];
        if ((pc.flag & PROBE_NO_PRODUCTS) == 0u) {
#ifdef FMA_PRODUCTS
            bool loads = (pc.flag & PROBE_NO_OPERAND_LOADS) == 0u;
            for (uint r = 0u; r < 16u; ++r) {
                uint br = rb * 16u + r;
                if (br >= pc.B) break;
                uint a_r = ((t + 1u) * pc.B + br) * H3;
                uint a_a = (ta * pc.B + br) * H3;
                // Every load of the row is issued before the first is used.
                uvec4 ld[SC_Q][2];
                [[unroll]] for (uint i = 0u; i < SC_Q; ++i) {
                    uint q = tg + 4u * i;
                    bool is_r = i < 3u;
                    uint kt = is_r ? sg + SUBGROUPS * q : ka0 + sg + SUBGROUPS * (q - KR_MAX);
                    bool valid = loads && q < KQ && (is_r ? r_on && kt < ktiles : a_on && kt < ka1);
                    ld[i][0] = uvec4(0u);
                    ld[i][1] = uvec4(0u);
                    if (valid) {
                        uint e = (is_r ? a_r : a_a) + kt * 16u;
                        uint from = is_r ? src_r : 2u;
                        ld[i][0] = load8(from, e);
                        ld[i][1] = load8(from, e + 8u);
                    }
                }
                vec2 acc_r = vec2(0.0), acc_a = vec2(0.0);
                [[unroll]] for (uint i = 0u; i < SC_Q; ++i) {
                    vec2 s = vec2(0.0);
                    [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                        vec2 g = unpackHalf2x16(ld[i][x / 4u][x % 4u]);
                        s = fma(vec2(g.x), unpackHalf2x16(wk[i][2u * x]), s);
                        s = fma(vec2(g.y), unpackHalf2x16(wk[i][2u * x + 1u]), s);
                    }
                    if (i < 3u) acc_r += s; else acc_a += s;
                }
                acc_r += subgroupShuffleXor(acc_r, 8u);
                acc_r += subgroupShuffleXor(acc_r, 16u);
                acc_a += subgroupShuffleXor(acc_a, 8u);
                acc_a += subgroupShuffleXor(acc_a, 16u);
                if (tg == 0u) {
                    uint o = r * 16u + 2u * cg;
                    part[sg * 256u + o] = acc_r.x;
                    part[sg * 256u + o + 1u] = acc_r.y;
                    part[(SUBGROUPS + sg) * 256u + o] = acc_a.x;
                    part[(SUBGROUPS + sg) * 256u + o + 1u] = acc_a.y;
                }
            }
#else
            FRAG_C acc_r[3];
            FRAG_C acc_a[2];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) acc_r[q] = FRAG_C(0.0);
            [[unroll]] for (uint q = 0u; q < 2u; ++q) acc_a[q] = FRAG_C(0.0);
            uint a_r = ((t + 1u) * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
            uint a_a = (ta * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
            // Rows past B (a partial row block) are not read: their products
            // are not used.
            bool loads = (pc.flag & PROBE_NO_OPERAND_LOADS) == 0u && rb * 16u + lane / 2u < pc.B;
#ifdef WAVE_PROBE
            bool stage = (pc.flag & PROBE_NO_STAGING) == 0u, frag_loads = (pc.flag & PROBE_NO_FRAG_LOADS) == 0u;
            bool mma = (pc.flag & PROBE_NO_MMA) == 0u, frag_stores = (pc.flag & PROBE_NO_FRAG_STORES) == 0u;
            bool direct = (pc.flag & PROBE_DIRECT_OPERAND_LOADS) != 0u;
            // The first elements of the operands' row blocks (straight loads).
            uint e_r = ((t + 1u) * pc.B + rb * 16u) * H3, e_a = (ta * pc.B + rb * 16u) * H3;
#endif
            // Every load of the step is issued before the first is used.
            uvec4 ld[KQ];
            [[unroll]] for (uint q = 0u; q < KQ; ++q) {
                ld[q] = uvec4(0u);
                if (q < KR_MAX) {
                    uint kt = sg + SUBGROUPS * q;
                    if (r_on && loads && kt < ktiles AND_PROBE(!direct)) ld[q] = load8(src_r, a_r + kt * 16u);
                } else {
                    uint kt = ka0 + sg + SUBGROUPS * (q - KR_MAX);
                    if (a_on && loads && kt < ka1 AND_PROBE(!direct)) ld[q] = load8(2u, a_a + kt * 16u);
                }
            }
            [[unroll]] for (uint r = 0u; r < ROUNDS; ++r) {
                IF_PROBE(stage && !direct) {
                    if (r > 0u) subgroupBarrier();
                    [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) stg[sbase + i * 32u + lane] = ld[r * KT_STAGE + i];
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                }
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) {
                    uint q = r * KT_STAGE + i;
                    FRAG_A ga;
                    if (q < KR_MAX) {
                        if (r_on && sg + SUBGROUPS * q < ktiles) {
                            LOAD_A(ga, src_r, e_r + (sg + SUBGROUPS * q) * 16u, i);
                            IF_PROBE(mma) acc_r[q % 3u] = coopMatMulAdd(ga, wb[q], acc_r[q % 3u]);
                        }
                    } else if (a_on && ka0 + sg + SUBGROUPS * (q - KR_MAX) < ka1) {
                        LOAD_A(ga, 2u, e_a + (ka0 + sg + SUBGROUPS * (q - KR_MAX)) * 16u, i);
                        IF_PROBE(mma) acc_a[q % 2u] = coopMatMulAdd(ga, wb[q], acc_a[q % 2u]);
                    }
                }
            }
            acc_r[0] = acc_r[0] + acc_r[1] + acc_r[2];
            acc_a[0] = acc_a[0] + acc_a[1];
            IF_PROBE(frag_stores) {
                coopMatStore(acc_r[0], part, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
                coopMatStore(acc_a[0], part, (SUBGROUPS + sg) * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            }
#endif
        } else {
            // Probe without products: zero partial sums.
            for (uint e = lid; e < 2u * SUBGROUPS * 256u; e += 256u) part[e] = 0.0;
#ifdef WAVE_PROBE
            if ((pc.flag & PROBE_OPERAND_LOADS_ONLY) != 0u) {
                // The operands' loads alone: each one waited for.
                uint a_r = ((t + 1u) * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
                uint a_a = (ta * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
                bool row_in = rb * 16u + lane / 2u < pc.B;
                // As the products issue them: every load before the first use.
                uvec4 ld[KQ];
                [[unroll]] for (uint q = 0u; q < KQ; ++q) {
                    ld[q] = uvec4(0u);
                    if (q < KR_MAX) {
                        uint kt = sg + SUBGROUPS * q;
                        if (r_on && row_in && kt < ktiles) ld[q] = load8(src_r, a_r + kt * 16u);
                    } else {
                        uint kt = ka0 + sg + SUBGROUPS * (q - KR_MAX);
                        if (a_on && row_in && kt < ka1) ld[q] = load8(2u, a_a + kt * 16u);
                    }
                }
                uint x = 0u;
                [[unroll]] for (uint q = 0u; q < KQ; ++q) x ^= ld[q].x ^ ld[q].y ^ ld[q].z ^ ld[q].w;
                if (x == 0x7fc00001u) part[sg * 256u + lane] = 1.0;
            }
#endif
        }
        barrier();
        if (!mine) {
            // Nothing of this interval is this invocation's.
        } else {
        float sum_a = 0.0;
        for (uint s = 0u; s < SUBGROUPS; ++s) sum_a += part[(SUBGROUPS + s) * 256u + bl * 16u + u];
        if (layer == 1u && a_on) {
            // The first half of d_h0[ta], for layer 0 next interval.
            d_h0[(ta * pc.B + b) * H + j] = sum_a;
        }
        if (on_step) {
        float carry = 0.0;
        if (above) {
            float sum = 0.0;
            for (uint s = 0u; s < SUBGROUPS; ++s) sum += part[s * 256u + bl * 16u + u];
            carry = dh_next * v_znext + sum;
        }
        if (layer == 0u) {
            v_dh += sum_a;
            d_h0[x] = v_dh;
        }
        float dh = v_dh + carry;
        float dn = dh * (1.0 - v_z);
        float dz = dh * (v_hp - v_n);
        float dan = dn * (1.0 - v_n * v_n);
        float dar = dan * v_ghn * v_r * (1.0 - v_r);
        float daz = dz * v_z * (1.0 - v_z);
        uint g = row * H3;
        if ((pc.flag & PROBE_NO_STORES) != 0u) {
            // Probe: a store that never happens keeps the arithmetic.
            if (dar + daz + dan == 12345.0) dh_tot1[x] = dh;
        } else if (layer == 0u) {
            dh_tot0[x] = dh;
            d_gi0[g + j] = dar;
            d_gi0[g + H + j] = daz;
            d_gi0[g + 2u * H + j] = dan;
            d_gh0[g + j] = dar;
            d_gh0[g + H + j] = daz;
            d_gh0[g + 2u * H + j] = dan * v_r;
            d_gh0s[g + j] = float16_t(dar);
            d_gh0s[g + H + j] = float16_t(daz);
            d_gh0s[g + 2u * H + j] = float16_t(dan * v_r);
        } else {
            dh_tot1[x] = dh;
            d_gi1[g + j] = dar;
            d_gi1[g + H + j] = daz;
            d_gi1[g + 2u * H + j] = dan;
            d_gh1[g + j] = dar;
            d_gh1[g + H + j] = daz;
            d_gh1[g + 2u * H + j] = dan * v_r;
            d_gh1s[g + j] = float16_t(dar);
            d_gh1s[g + H + j] = float16_t(daz);
            d_gh1s[g + 2u * H + j] = float16_t(dan * v_r);
            d_gi1s[g + j] = float16_t(dar);
            d_gi1s[g + H + j] = float16_t(daz);
            d_gi1s[g + 2u * H + j] = float16_t(dan);
        }
        dh_next = dh;
        }
        }
        // The next interval's staging and partial sums overwrite this one's
        // only after every invocation has read them: grid_sync starts with
        // a barrier.
    }
}
