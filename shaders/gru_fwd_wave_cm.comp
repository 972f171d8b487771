#version 450
// Both layers of a two-layer GRU forward in one dispatch, as a wavefront:
// in interval i, layer 0 computes step t = i and layer 1 step t = i - 2, so
// the two layers' T steps take T + 2 dependent intervals instead of 2T.
// Layer 1's input projection gi1[t] = W_ih1 h0[t] + b_ih1 is computed here
// (not by a GEMM beforehand), its K range split between the layers so that
// every workgroup has the same work:
//   - interval t: layer 0 computes h0[t];
//   - interval t + 1: layer 0 multiplies h0[t] by the second half of W_ih1's
//     K-tiles and writes that partial sum into gi1[t];
//   - interval t + 2: layer 1 adds the first half's product and b_ih1 to it,
//     writes the whole gi1[t] (for inspection: the ladder's gru_fwd rung) and
//     runs its step t.
//
// The tiling and arithmetic are gru_fwd_grid_cm's: workgroups 0 .. G-1 run
// layer 0 and G .. 2G-1 layer 1 (G = RB · H/16, RB = ceil(B/16)), each
// owning 16 rows × 16 units with its weight slices in registers as f16
// cooperative-matrix fragments; products are f16 × f16 → f32. A workgroup's
// tiles are its layer's H/16 recurrent ones (R: h[t-1] · W_hh^T) and then its
// half of the input projection's (P: h0[s] · W_ih1^T, layer 1 the first
// ceil(H/32) K-tiles, layer 0 the rest); subgroup ss of 8 takes tiles ss + 8i.
// At H = 512 that is 4 R + 2 P tiles per subgroup in both layers (before:
// layer 1's subgroups took 8 and layer 0's 4). Each subgroup stores its 16×48
// partial sums of R to `part` and of P to its own staging area, and
// invocation (row, unit) adds them up and applies the gates. The f16 copies
// h0s, h1s (16 rows of padding past T·B) are what the products read, staged
// through shared memory with 16-byte loads; gates, h and every stored
// tensor are f32.
//
// The dispatch walks intervals pc.t .. pc.t + pc.n - 1 with the grid-wide
// barrier of include/grid.glsl between them (pc.n = 1: one dispatch per
// interval). Needs subgroup size 32, H % 16 == 0, H <= 512, all workgroups
// resident at once (the engine checks).
//   gi0 [T,B,3H] (W_ih0 u_t + b_ih0); gh*, gi1 [T,B,3H]; gates* [3][T,B,H];
//   h* [T,B,H]; h*s [T·B + 16, H] (f16).
// SCALAR_PRODUCT (the variant gru_fwd_wave_sc_nc, for a few rows, with
// OPERANDS_NONCOHERENT): the same products as f32 FMAs of the f16 values
// instead of cooperative matrices, for rows < B only (a tile of 16 rows
// wastes 15/16 of its work at B = 1), straight from the loads without
// staging. Lane 8·tg + cg of subgroup ss takes the tiles ss + 8·(tg + 4i)
// and the gate columns 6cg .. 6cg + 5 (column c: gate c/16, unit c%16), its
// weights in registers as f16 pairs along k; two shuffles sum the four
// lanes of a column, and the partial sums go where the fragments' go.
// Parameter offsets: W_hh0 pc.off0, b_hh0 pc.off1, W_ih1 pc.off2, and (in
// fields this kernel has no other use for) b_ih1 pc.A, W_hh1 pc.NH, b_hh1 pc.W.
// flag 1: no arithmetic, only pc.n - 1 grid barriers (the residency check).
//
// OPERANDS_NONCOHERENT (the variant gru_fwd_wave_cm_nc): the products' loads
// of h0s, h1s without `coherent`, so that they may be served through the
// SM's L1. Only for H % 64 == 0 (Engine::wave_noncoherent): a row (2H bytes)
// is then whole 128-byte cache lines, and a workgroup reads only rows of
// steps done before the last grid barrier (rows past B in a partial row
// block are not loaded), whose values were written and made available
// then; so no line a load brings into L1 was there before its final value,
// and there is nothing stale to hit. (Session 5's variant loaded the whole
// block: with B % 16 != 0 that cached rows of steps not yet computed, and the
// B = 1 ladder failed.) gi1's partial sums are read `coherent`.
#extension GL_GOOGLE_include_directive : enable
#ifndef SCALAR_PRODUCT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"

#define OFF_WHH0 pc.off0
#define OFF_BHH0 pc.off1
#define OFF_WIH1 pc.off2
#define OFF_BIH1 pc.A
#define OFF_WHH1 pc.NH
#define OFF_BHH1 pc.W

#define SUBGROUPS 8u
// Tiles per subgroup at most: H/16 R tiles and up to ceil(H/32) P tiles over
// 8 subgroups (H <= 512: 48 / 8). All of a step's tiles are staged at once.
#define KT_MAX 6u
// Gate columns of a workgroup: 3 gates × 16 units.
#define NC 48u
// Interval lag of layer 1 behind layer 0 (Engine's FWD_WAVE_LAG).
#define LAG1 2u
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
// Layer 0 writes its half of the projection here, layer 1 reads it back an
// interval later (another workgroup's write: coherent) and writes the sum.
layout(std430, binding = 8) coherent buffer Gi1 { float gi1[]; };
layout(std430, binding = 9) writeonly buffer Gh1 { float gh1[]; };
layout(std430, binding = 10) writeonly buffer Gates1 { float gates1[]; };
layout(std430, binding = 11) buffer H1 { float h1[]; };
layout(std430, binding = 12) coherent buffer H1s { float16_t h1s[]; };
#ifdef OPERANDS_NONCOHERENT
layout(std430, binding = 12) readonly buffer H1v { uvec4 h1v[]; };
#else
layout(std430, binding = 12) coherent buffer H1v { uvec4 h1v[]; };
#endif

// Each subgroup's area (KT_MAX · 32 uvec4, 3 KB): first its weight tiles on
// their way into registers ([column][16 k], 2 uvec4 per column, 96 per
// tile), then its tiles of h on their way into fragments ([16 rows × 16],
// 32 uvec4 per tile), then its 16×48 f32 partial sums of P (as bits).
#define AREA (KT_MAX * 32u)
shared uvec4 stg[SUBGROUPS * AREA];
// Each subgroup's partial sums of R: [subgroup][row][column].
shared float part[SUBGROUPS * 16u * NC];

// Subgroup s's P partial sum of (row, column), in its area.
float p_part(uint s, uint row, uint col) {
    uint i = s * AREA * 4u + row * NC + col;
    return uintBitsToFloat(stg[i >> 2][i & 3u]);
}

#ifndef SCALAR_PRODUCT
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif
// The scalar variant's tiles a lane takes at most (KT_MAX over 4 lanes).
#define SC_TILES ((KT_MAX + 3u) / 4u)

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
    // R tiles, then P tiles: layer 1 takes W_ih1's K-tiles 0 .. half - 1,
    // layer 0 half .. kt - 1.
    uint kt = H / 16u;
    uint half_kt = (kt + 1u) / 2u;
    uint pk = layer == 0u ? kt - half_kt : half_kt;
    uint kbase = layer == 0u ? half_kt : 0u;
    uint woff_r = layer == 0u ? OFF_WHH0 : OFF_WHH1;
    uint sbase = sg * AREA;

#ifdef SCALAR_PRODUCT
    // This lane's weights: wk[i][c][x] packs k = 2x, 2x + 1 of tile
    // ss + 8·(tg + 4i) for column 6cg + c (zero past the tiles).
    uint tg = lane / 8u, cg = lane % 8u;
    uint wk[SC_TILES][6][8];
    [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
        uint ti = sg + SUBGROUPS * (tg + 4u * i);
        bool is_r = ti < kt;
        uint woff = is_r ? woff_r : OFF_WIH1;
        uint k0 = (is_r ? ti : kbase + ti - kt) * 16u;
        [[unroll]] for (uint c = 0u; c < 6u; ++c) {
            uint col = 6u * cg + c, q = col / 16u;
            uint src = woff + (q * H + j0 + col - q * 16u) * H + k0;
            [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                wk[i][c][x] = 0u;
                if (ti < kt + pk) wk[i][c][x] = packFloat2x16(f16vec2(p[src + 2u * x], p[src + 2u * x + 1u]));
            }
        }
    }
#else
    // The weight fragments: tile i is tile sg + 8i, all three gate tiles;
    // staged per subgroup as [column][k] (k contiguous in memory).
    FRAG_B wb[KT_MAX][3];
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        uint ti = sg + SUBGROUPS * i;
        if (ti >= kt + pk) break;
        bool is_r = ti < kt;
        uint woff = is_r ? woff_r : OFF_WIH1;
        uint kk = is_r ? ti : kbase + ti - kt;
        for (uint e = lane; e < NC * 2u; e += 32u) {
            uint c = e / 2u, k0 = kk * 16u + (e & 1u) * 8u;
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
    if (pc.flag == 1u) {
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    uint bl = lid / 16u, u = lid % 16u;
    uint b = rb * 16u + bl, j = j0 + u;
    bool mine = b < pc.B && j < H;
    uint lag = layer == 0u ? 0u : LAG1;
    vec3 bias_h = vec3(0.0), bias_i = vec3(0.0);
    float hp = 0.0;
    if (mine) {
        bias_h = load3(layer == 0u ? OFF_BHH0 : OFF_BHH1, j);
        if (layer == 1u) bias_i = load3(OFF_BIH1, j);
        // h_{t-1} of the first interval's step.
        if (pc.t >= lag + 1u && pc.t - lag - 1u < pc.T) {
            uint x = ((pc.t - lag - 1u) * pc.B + b) * H + j;
            hp = layer == 0u ? h0[x] : h1[x];
        }
    }
    uint rh = pc.T * pc.B * H;
    for (uint it = pc.t; it < pc.t + pc.n; ++it) {
        // This interval's step t of the layer, and the step ps whose
        // projection it multiplies (layer 0: the one before its own).
        bool on_step = it >= lag && it - lag < pc.T;
        uint t = it - lag;
        uint ps = layer == 0u ? it - 1u : t;
        bool p_on = layer == 0u ? (it >= 1u && it - 1u < pc.T) : on_step;
        uint row = t * pc.B + b;
        vec3 gin = vec3(0.0);
        if (on_step && mine && layer == 0u) {
            uint g = row * 3u * H;
            gin = vec3(gi0[g + j], gi0[g + H + j], gi0[g + 2u * H + j]);
        }
        if (it > pc.t) grid_sync(it - pc.t);
        if (!on_step && !p_on) continue;
        // Layer 0's half of the projection, written in the interval before.
        if (on_step && mine && layer == 1u) {
            uint g = row * 3u * H;
            gin = vec3(gi1[g + j], gi1[g + H + j], gi1[g + 2u * H + j]);
        }
        // The recurrent product is zero at t = 0 (h_{-1} = 0).
        bool r_on = on_step && t > 0u;
        bool r_from_h1 = layer == 1u;
#ifdef SCALAR_PRODUCT
        for (uint r = 0u; r < 16u; ++r) {
            uint br = rb * 16u + r;
            if (br >= pc.B) break;
            // Every load of the row is issued before the first is used.
            uvec4 ld[SC_TILES][2];
            [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
                uint ti = sg + SUBGROUPS * (tg + 4u * i);
                bool is_r = ti < kt;
                ld[i][0] = uvec4(0u);
                ld[i][1] = uvec4(0u);
                if (is_r ? r_on : (p_on && ti < kt + pk)) {
                    uint k0 = (is_r ? ti : kbase + ti - kt) * 16u;
                    uint e = (((is_r ? t - 1u : ps) * pc.B + br) * H + k0) >> 3;
                    bool h1_op = is_r && r_from_h1;
                    ld[i][0] = h1_op ? h1v[e] : h0v[e];
                    ld[i][1] = h1_op ? h1v[e + 1u] : h0v[e + 1u];
                }
            }
            float acc_r[6], acc_p[6];
            [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                acc_r[c] = 0.0;
                acc_p[c] = 0.0;
            }
            [[unroll]] for (uint i = 0u; i < SC_TILES; ++i) {
                float acc[6];
                [[unroll]] for (uint c = 0u; c < 6u; ++c) acc[c] = 0.0;
                [[unroll]] for (uint x = 0u; x < 8u; ++x) {
                    vec2 hv = unpackHalf2x16(ld[i][x / 4u][x % 4u]);
                    [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                        vec2 wv = unpackHalf2x16(wk[i][c][x]);
                        acc[c] = fma(hv.y, wv.y, fma(hv.x, wv.x, acc[c]));
                    }
                }
                bool is_r = sg + SUBGROUPS * (tg + 4u * i) < kt;
                [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                    acc_r[c] += is_r ? acc[c] : 0.0;
                    acc_p[c] += is_r ? 0.0 : acc[c];
                }
            }
            [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                acc_r[c] += subgroupShuffleXor(acc_r[c], 8u);
                acc_r[c] += subgroupShuffleXor(acc_r[c], 16u);
                acc_p[c] += subgroupShuffleXor(acc_p[c], 8u);
                acc_p[c] += subgroupShuffleXor(acc_p[c], 16u);
            }
            if (tg == 0u) {
                [[unroll]] for (uint c = 0u; c < 6u; ++c) {
                    uint col = 6u * cg + c;
                    part[(sg * 16u + r) * NC + col] = acc_r[c];
                    uint i = sbase * 4u + r * NC + col;
                    stg[i >> 2][i & 3u] = floatBitsToUint(acc_p[c]);
                }
            }
        }
#else
        {
            FRAG_C acc_r[3];
            FRAG_C acc_p[3];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) {
                acc_r[q] = FRAG_C(0.0);
                acc_p[q] = FRAG_C(0.0);
            }
            // Lane l brings 8 values of row l/2 of each tile. Rows past B (a
            // partial row block) are not read: they would be rows of other
            // steps, and their products are not used.
            uint rl = rb * 16u + lane / 2u, kl = (lane & 1u) * 8u;
            bool row_in = rl < pc.B;
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint ti = sg + SUBGROUPS * i;
                bool is_r = ti < kt;
                ld[i] = uvec4(0u);
                if (row_in && (is_r ? r_on : (p_on && ti < kt + pk))) {
                    uint k0 = (is_r ? ti : kbase + ti - kt) * 16u + kl;
                    uint e = (((is_r ? t - 1u : ps) * pc.B + rl) * H + k0) >> 3;
                    ld[i] = is_r && r_from_h1 ? h1v[e] : h0v[e];
                }
            }
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) stg[sbase + i * 32u + lane] = ld[i];
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint ti = sg + SUBGROUPS * i;
                if (ti < kt + pk) {
                    FRAG_A xa;
                    coopMatLoad(xa, stg, sbase + i * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor);
                    if (ti < kt)
                        [[unroll]] for (uint q = 0u; q < 3u; ++q) acc_r[q] = coopMatMulAdd(xa, wb[i][q], acc_r[q]);
                    else
                        [[unroll]] for (uint q = 0u; q < 3u; ++q) acc_p[q] = coopMatMulAdd(xa, wb[i][q], acc_p[q]);
                }
            }
            // The staged tiles are read; the area takes the P partial sums
            // (16 rows × 48 floats: 12 uvec4 a row).
            subgroupBarrier();
            [[unroll]] for (uint q = 0u; q < 3u; ++q) {
                coopMatStore(acc_r[q], part, sg * 16u * NC + q * 16u, NC, gl_CooperativeMatrixLayoutRowMajor);
                coopMatStore(acc_p[q], stg, sbase + q * 4u, NC / 4u, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
#endif
        barrier();
        vec3 pj = vec3(0.0);
        if (mine) {
            if (p_on)
                for (uint s = 0u; s < SUBGROUPS; ++s)
                    pj += vec3(p_part(s, bl, u), p_part(s, bl, u + 16u), p_part(s, bl, u + 32u));
            if (layer == 0u && p_on) {
                uint g = (ps * pc.B + b) * 3u * H;
                gi1[g + j] = pj.x;
                gi1[g + H + j] = pj.y;
                gi1[g + 2u * H + j] = pj.z;
            }
        }
        if (mine && on_step) {
            vec3 m = vec3(0.0);
            if (r_on) {
                for (uint s = 0u; s < SUBGROUPS; ++s) {
                    uint o = (s * 16u + bl) * NC + u;
                    m += vec3(part[o], part[o + 16u], part[o + 32u]);
                }
            }
            uint g = row * 3u * H;
            if (layer == 1u) {
                gin += bias_i + pj;
                gi1[g + j] = gin.x;
                gi1[g + H + j] = gin.y;
                gi1[g + 2u * H + j] = gin.z;
            }
            vec3 ghv = m + bias_h;
            float r = sigmoid(gin.x + ghv.x);
            float z = sigmoid(gin.y + ghv.y);
            float n = tanh_safe(gin.z + r * ghv.z);
            hp = (1.0 - z) * n + z * hp;
            uint x = row * H + j;
            if (layer == 0u) {
                gh0[g + j] = ghv.x;
                gh0[g + H + j] = ghv.y;
                gh0[g + 2u * H + j] = ghv.z;
                gates0[x] = r;
                gates0[rh + x] = z;
                gates0[2u * rh + x] = n;
                h0[x] = hp;
                h0s[x] = float16_t(hp);
            } else {
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
