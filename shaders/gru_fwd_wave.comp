#version 450
// Both layers of a two-layer GRU forward in one dispatch, as a wavefront:
// in interval i, layer 0 computes step t = i and layer 1 step t = i - 1, so
// the two layers' T steps take T + 1 dependent intervals instead of 2T.
// Layer 1's input projection gi1[t] = W_ih1 h0[t] + b_ih1 is computed here
// from layer 0's h0[t] of the interval before (not by a GEMM beforehand).
//
// The tiling and arithmetic are gru_fwd_grid_cm's: workgroups 0 .. G-1 run
// layer 0 and G .. 2G-1 layer 1 (G = RB · H/16, RB = ceil(B/16)), each
// owning 16 rows × 16 units with its weight slices in registers as f16
// cooperative-matrix fragments; products are f16 × f16 → f32.
//   - layer 0: one product, h0[t-1] · W_hh0^T, its 32 K-tiles over 8 subgroups;
//   - layer 1: two, h0[t] · W_ih1^T on subgroups 0-3, h1[t-1] · W_hh1^T on 4-7.
// Each subgroup stores its 16×48 partial sums; invocation (row, unit) adds
// them up and applies the gates. The f16 copies h0s, h1s (16 rows of
// padding past T·B) are what the products read, staged through shared
// memory with coherent 16-byte loads; gates, h and every stored tensor are
// f32. gi1 is written only for inspection (the ladder's gru_fwd rung).
//
// The dispatch walks intervals pc.t .. pc.t + pc.n - 1 with the grid-wide
// barrier of include/grid.glsl between them (pc.n = 1: one dispatch per
// interval). Needs subgroup size 32, H % 16 == 0, H <= 512, all workgroups
// resident at once (the engine checks).
//   gi0 [T,B,3H] (W_ih0 u_t + b_ih0); gh*, gi1 [T,B,3H]; gates* [3][T,B,H];
//   h* [T,B,H]; h*s [T·B + 16, H] (f16).
// FMA_PRODUCTS (the variant gru_fwd_wave_fma_nc, for a few rows, with
// OPERANDS_NONCOHERENT): the same products as f32 FMAs of the f16 values
// instead of cooperative matrices, for rows < B only (a tile of 16 rows
// wastes 15/16 of its work at B = 1), straight from the loads without
// staging. Lane 8·tg + cg of subgroup ss takes the K-tiles ss + nsub·(tg + 4i)
// and the gate columns 6cg .. 6cg + 5 (column c: gate c/16, unit c%16), its
// weights in registers as f16 pairs along k; two shuffles sum the four
// lanes of a column, and the partial sums go to `part` as the fragments do.
// Parameter offsets: W_hh0 pc.off0, b_hh0 pc.off1, W_ih1 pc.off2, and (in
// fields this kernel has no other use for) b_ih1 pc.A, W_hh1 pc.NH, b_hh1 pc.W.
// pc.flag (include/probe_bits.glsl): PROBE_BARRIERS_ONLY, no arithmetic,
// only pc.n - 1 grid barriers (the residency check). The lab's timing probes
// (Engine::probe_fwd_wave; what they write is meaningless), only in the
// variant built with WAVE_PROBE (gru_fwd_wave_cm_nc_probe; the switches
// alone cost the FMA variant 0.07 ms of a B=1 T=512 step and the
// cooperative-matrix one 9 µs of a `small` step): the products' operands
// not loaded (zeros), no products (nor their loads), nothing stored to
// memory after the gates, the step's own inputs (gi0) not loaded
// (PROBE_NO_OPERAND_LOADS, PROBE_NO_PRODUCTS, PROBE_NO_STORES,
// PROBE_NO_STEP_INPUTS); and the product's own parts: no staging (the
// operands' stores to `stg` and the subgroup barriers), no fragment loads
// from `stg` (zero fragments), no multiply-adds, no fragment stores to
// `part`, the operand fragments loaded straight from h0s / h1s (no staging;
// valid only for full row blocks; 25 % slower a step at `bench`), and with
// PROBE_NO_PRODUCTS the operands' loads alone (each waited for, nothing
// multiplied): PROBE_NO_STAGING, PROBE_NO_FRAG_LOADS, PROBE_NO_MMA,
// PROBE_NO_FRAG_STORES, PROBE_DIRECT_OPERAND_LOADS, PROBE_OPERAND_LOADS_ONLY.
//
// OPERANDS_NONCOHERENT (the variant gru_fwd_wave_cm_nc): the products' loads
// of h0s, h1s without `coherent`, so that they may be served through the
// SM's L1. Only for H % 64 == 0 (Engine::wave_noncoherent): a row (2H bytes)
// is then whole 128-byte cache lines, and a workgroup reads only rows of the
// step it reads (rows past B in a partial row block are not loaded), whose
// values were written and made available before the last grid barrier; so
// no line a load brings into L1 was there before its final value, and there
// is nothing stale to hit. (Loading the whole block would not do: with
// B % 16 != 0 that caches rows of steps not yet computed, and the B = 1
// ladder fails.)
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

#define OFF_WHH0 pc.off0
#define OFF_BHH0 pc.off1
#define OFF_WIH1 pc.off2
#define OFF_BIH1 pc.A
#define OFF_WHH1 pc.NH
#define OFF_BHH1 pc.W

#ifdef WAVE_PROBE
#define PROBE pc.flag
// A statement the probe's switches may skip (in the step's kernels, always run).
#define IF_PROBE(c) if (c)
#define AND_PROBE(c) && (c)
#else
#define PROBE 0u
#define IF_PROBE(c)
#define AND_PROBE(c)
#endif
#define SUBGROUPS 8u
// K-tiles per subgroup at most: layer 1 splits each product over 4
// subgroups (H <= 512: 32 K-tiles / 4).
#define KT_MAX 8
// Tiles staged per subgroup at once (two rounds of a step's 8).
#define KT_STAGE 4
// Gate columns of a workgroup: 3 gates × 16 units.
#define NC 48u
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi0 { float gi0[]; };
layout(std430, binding = 2) writeonly buffer Gh0 { float gh0[]; };
layout(std430, binding = 3) writeonly buffer Gates0 { float gates0[]; };
layout(std430, binding = 4) buffer H0 { float h0[]; };
#define GRID_STATE_BINDING 5
#define GRID_SYNC_BINDING 6
#include "grid.glsl"
layout(std430, binding = 7) coherent buffer H0s { float16_t h0s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 7) readonly buffer H0v { uvec4 h0v[]; };
#else
layout(std430, binding = 7) coherent buffer H0v { uvec4 h0v[]; };
#endif
layout(std430, binding = 8) writeonly buffer Gi1 { float gi1[]; };
layout(std430, binding = 9) writeonly buffer Gh1 { float gh1[]; };
layout(std430, binding = 10) writeonly buffer Gates1 { float gates1[]; };
layout(std430, binding = 11) buffer H1 { float h1[]; };
layout(std430, binding = 12) coherent buffer H1s { float16_t h1s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 12) readonly buffer H1v { uvec4 h1v[]; };
#else
layout(std430, binding = 12) coherent buffer H1v { uvec4 h1v[]; };
#endif

// Each subgroup's staging: first its weight tiles on their way into
// registers ([column][16 k], 2 uvec4 per column, 96 per tile), then its
// tiles of h on their way into fragments ([16 rows × 16], 32 uvec4 per tile).
shared uvec4 stg[SUBGROUPS * KT_STAGE * 32u];
// Each subgroup's partial sums of the interval: [subgroup][row][column].
shared float part[SUBGROUPS * 16u * NC];

#ifndef FMA_PRODUCTS
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif
// The FMA variant's tiles a lane takes at most (KT_MAX over 4 lanes).
#define SC_TILES (KT_MAX / 4u)

vec3 load3(uint off, uint j) {
    return vec3(p[off + j], p[off + pc.H + j], p[off + 2u * pc.H + j]);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint H = pc.H;
    uint rb_count = (pc.B + 15u) / 16u;
    uint groups = rb_count * (H / 16u);
    uint layer = gl_WorkGroupID.x / groups;
    uint local_id = gl_WorkGroupID.x - layer * groups;
    uint rb = local_id % rb_count;
    uint j0 = (local_id / rb_count) * 16u;
    uint ktiles = H / 16u;
    // This subgroup's product: layer 0 has one over 8 subgroups, layer 1 two
    // over 4 each (prod 0: the input projection, 1: the recurrent product).
    uint nsub = layer == 0u ? SUBGROUPS : SUBGROUPS / 2u;
    uint prod = layer == 0u ? 1u : sg / nsub;
    uint ss = sg % nsub;
    uint woff = layer == 0u ? OFF_WHH0 : (prod == 0u ? OFF_WIH1 : OFF_WHH1);

#ifdef FMA_PRODUCTS
    // This lane's weights: wk[i][c][x] packs k = 2x, 2x + 1 of K-tile
    // ss + nsub·(tg + 4i) for column 6cg + c (zero past the K-tiles).
    uint tg = lane / 8u, cg = lane % 8u;
    uint wk[SC_TILES][6][8];
    [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
        uint kt = ss + nsub * (tg + 4u * i);
        [[unroll]] for (uint c = 0u; c < 6u; ++c) {
            uint col = 6u * cg + c, q = col / 16u;
            uint src = woff + (q * H + j0 + col - q * 16u) * H + kt * 16u;
            [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                wk[i][c][x] = 0u;
                if (kt < ktiles) wk[i][c][x] = packFloat2x16(f16vec2(p[src + 2u * x], p[src + 2u * x + 1u]));
            }
        }
    }
#else
    // The weight fragments: tile i is K-tile ss + nsub·i of W^T, all three
    // gate tiles; staged per subgroup as [column][k] (k contiguous in memory).
    FRAG_B wb[KT_MAX][3];
    uint sbase = sg * KT_STAGE * 32u;
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        uint kt = ss + nsub * i;
        if (kt >= ktiles) break;
        for (uint e = lane; e < NC * 2u; e += 32u) {
            uint c = e / 2u, k0 = kt * 16u + (e & 1u) * 8u;
            uint q = c / 16u, u = c - q * 16u;
            uint src = woff + (q * H + j0 + u) * H + k0;
            uint w[4];
            [[unroll]] for (uint x = 0u; x < 4u; ++x) w[x] = packFloat2x16(f16vec2(p[src + 2u * x], p[src + 2u * x + 1u]));
            stg[sbase + e] = uvec4(w[0], w[1], w[2], w[3]);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint q = 0u; q < 3u; ++q)
            coopMatLoad(wb[i][q], stg, sbase + q * 32u, 2u, gl_CooperativeMatrixLayoutColumnMajor);
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
    vec3 bias_h = vec3(0.0), bias_i = vec3(0.0);
    float hp = 0.0;
    if (mine) {
        bias_h = load3(layer == 0u ? OFF_BHH0 : OFF_BHH1, j);
        if (layer == 1u) bias_i = load3(OFF_BIH1, j);
        // h_{t-1} of the first interval's step.
        if (pc.t >= layer + 1u && pc.t - layer - 1u < pc.T) {
            uint x = ((pc.t - layer - 1u) * pc.B + b) * H + j;
            hp = layer == 0u ? h0[x] : h1[x];
        }
    }
    uint rh = pc.T * pc.B * H;
    for (uint it = pc.t; it < pc.t + pc.n; ++it) {
        bool on_step = it >= layer && it - layer < pc.T;
        uint t = it - layer;
        uint row = t * pc.B + b;
        vec3 gin = vec3(0.0);
        if (on_step && mine && layer == 0u && (PROBE & PROBE_NO_STEP_INPUTS) == 0u) {
            uint g = row * 3u * H;
            gin = vec3(gi0[g + j], gi0[g + H + j], gi0[g + 2u * H + j]);
        }
        // Over every workgroup: waiting for the row block's alone (as the
        // backward does) made no step faster on the H200 (docs/speed.md).
        if (it > pc.t) grid_sync(it - pc.t);
        if (!on_step) continue;
        // The recurrent product is zero at t = 0 (h_{-1} = 0).
        bool has_prod = (prod == 0u || t > 0u) && (PROBE & PROBE_NO_PRODUCTS) == 0u;
        bool load_ops = (PROBE & PROBE_NO_OPERAND_LOADS) == 0u;
#ifdef FMA_PRODUCTS
        if (has_prod) {
            uint srow = prod == 0u ? t : t - 1u;
            bool from_h1 = layer == 1u && prod == 1u;
            for (uint r = 0u; r < 16u; ++r) {
                uint br = rb * 16u + r;
                if (br >= pc.B) break;
                // Every load of the row is issued before the first is used.
                uint a0 = (srow * pc.B + br) * H;
                uvec4 ld[SC_TILES][2];
                [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
                    uint kt = ss + nsub * (tg + 4u * i);
                    ld[i][0] = uvec4(0u);
                    ld[i][1] = uvec4(0u);
                    if (kt < ktiles && load_ops) {
                        uint e = (a0 + kt * 16u) >> 3;
                        ld[i][0] = from_h1 ? h1v[e] : h0v[e];
                        ld[i][1] = from_h1 ? h1v[e + 1u] : h0v[e + 1u];
                    }
                }
                float acc[6];
                [[unroll]] for (uint c = 0u; c < 6u; ++c) acc[c] = 0.0;
                [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
                    [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                        vec2 hv = unpackHalf2x16(ld[i][x / 4u][x % 4u]);
                        [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                            vec2 wv = unpackHalf2x16(wk[i][c][x]);
                            acc[c] = fma(hv.y, wv.y, fma(hv.x, wv.x, acc[c]));
                        }
                    }
                }
                [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                    acc[c] += subgroupShuffleXor(acc[c], 8u);
                    acc[c] += subgroupShuffleXor(acc[c], 16u);
                }
                if (tg == 0u)
                    [[unroll]] for (uint c = 0u; c < 6u; ++c) part[(sg * 16u + r) * NC + 6u * cg + c] = acc[c];
            }
        }
#else
#ifdef WAVE_PROBE
        if ((PROBE & PROBE_OPERAND_LOADS_ONLY) != 0u && (prod == 0u || t > 0u)) {
            // The operands' loads alone (with bit 4): each one waited for.
            uint srow = prod == 0u ? t : t - 1u;
            uint a0 = (srow * pc.B + rb * 16u + lane / 2u) * H + (lane & 1u) * 8u;
            bool from_h1 = layer == 1u && prod == 1u;
            // As the product issues them: every load before the first use.
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = ss + nsub * i;
                ld[i] = uvec4(0u);
                if (kt < ktiles && rb * 16u + lane / 2u < pc.B) ld[i] = from_h1 ? h1v[(a0 + kt * 16u) >> 3] : h0v[(a0 + kt * 16u) >> 3];
            }
            uint x = 0u;
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) x ^= ld[i].x ^ ld[i].y ^ ld[i].z ^ ld[i].w;
            if (x == 0x7fc00001u) part[sg * 16u * NC + lane] = 1.0;
        }
#endif
        if (has_prod) {
            FRAG_C acc[3];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = FRAG_C(0.0);
            // Rows of h this product reads: h0[t] (layer 1's input), else
            // h[t-1] of the layer; lane l brings 8 values of row l/2 per tile.
            uint srow = prod == 0u ? t : t - 1u;
            uint a0 = (srow * pc.B + rb * 16u + lane / 2u) * H + (lane & 1u) * 8u;
            bool from_h1 = layer == 1u && prod == 1u;
            // Rows past B (a partial row block) are not read: they would be
            // rows of other steps, and their products are not used.
            bool row_in = rb * 16u + lane / 2u < pc.B;
#ifdef WAVE_PROBE
            bool stage = (PROBE & PROBE_NO_STAGING) == 0u, frag_loads = (PROBE & PROBE_NO_FRAG_LOADS) == 0u;
            bool mma = (PROBE & PROBE_NO_MMA) == 0u, frag_stores = (PROBE & PROBE_NO_FRAG_STORES) == 0u;
            bool direct = (PROBE & PROBE_DIRECT_OPERAND_LOADS) != 0u;
#endif
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = ss + nsub * i;
                ld[i] = uvec4(0u);
                if (kt < ktiles && row_in && load_ops AND_PROBE(!direct)) ld[i] = from_h1 ? h1v[(a0 + kt * 16u) >> 3] : h0v[(a0 + kt * 16u) >> 3];
            }
            [[unroll]] for (uint r = 0u; r < KT_MAX / KT_STAGE; ++r) {
                IF_PROBE(stage && !direct) {
                    if (r > 0u) subgroupBarrier();
                    [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) stg[sbase + i * 32u + lane] = ld[r * KT_STAGE + i];
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                }
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) {
                    uint ti = r * KT_STAGE + i;
                    if (ss + nsub * ti < ktiles) {
                        FRAG_A xa;
#ifdef WAVE_PROBE
                        xa = FRAG_A(float16_t(0.0));
                        if (direct) {
                            uint e = ((srow * pc.B + rb * 16u) * H + (ss + nsub * ti) * 16u) >> 3;
                            if (from_h1) coopMatLoad(xa, h1v, e, H / 8u, gl_CooperativeMatrixLayoutRowMajor);
                            else coopMatLoad(xa, h0v, e, H / 8u, gl_CooperativeMatrixLayoutRowMajor);
                        } else
#endif
                        IF_PROBE(frag_loads) coopMatLoad(xa, stg, sbase + i * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor);
                        IF_PROBE(mma) [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = coopMatMulAdd(xa, wb[ti][q], acc[q]);
                    }
                }
            }
            IF_PROBE(frag_stores) [[unroll]] for (uint q = 0u; q < 3u; ++q)
                coopMatStore(acc[q], part, sg * 16u * NC + q * 16u, NC, gl_CooperativeMatrixLayoutRowMajor);
        }
#endif
        barrier();
        // (The probe without stores keeps the gates: the stores only are skipped.)
        bool store = (PROBE & PROBE_NO_STORES) == 0u;
        if (mine) {
            vec3 m = vec3(0.0);
            if (t > 0u) {
                for (uint s = SUBGROUPS - nsub; s < SUBGROUPS; ++s) {
                    uint o = (s * 16u + bl) * NC + u;
                    m += vec3(part[o], part[o + 16u], part[o + 32u]);
                }
            }
            uint g = row * 3u * H;
            if (layer == 1u) {
                gin = bias_i;
                for (uint s = 0u; s < nsub; ++s) {
                    uint o = (s * 16u + bl) * NC + u;
                    gin += vec3(part[o], part[o + 16u], part[o + 32u]);
                }
                if (store) {
                    gi1[g + j] = gin.x;
                    gi1[g + H + j] = gin.y;
                    gi1[g + 2u * H + j] = gin.z;
                }
            }
            vec3 ghv = m + bias_h;
            float r = sigmoid(gin.x + ghv.x);
            float z = sigmoid(gin.y + ghv.y);
            float n = tanh_safe(gin.z + r * ghv.z);
            hp = (1.0 - z) * n + z * hp;
            uint x = row * H + j;
            if (store && layer == 0u) {
                gh0[g + j] = ghv.x;
                gh0[g + H + j] = ghv.y;
                gh0[g + 2u * H + j] = ghv.z;
                gates0[x] = r;
                gates0[rh + x] = z;
                gates0[2u * rh + x] = n;
                h0[x] = hp;
                h0s[x] = float16_t(hp);
            } else if (store) {
                gh1[g + j] = ghv.x;
                gh1[g + H + j] = ghv.y;
                gh1[g + 2u * H + j] = ghv.z;
                gates1[x] = r;
                gates1[rh + x] = z;
                gates1[2u * rh + x] = n;
                h1[x] = hp;
                h1s[x] = float16_t(hp);
            }
        }
        // The next interval's staging and partial sums overwrite this one's
        // only after every invocation has read them: grid_sync starts with
        // a barrier.
    }
}
