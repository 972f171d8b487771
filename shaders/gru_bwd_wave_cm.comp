#version 450
// Backpropagation through time for both layers of a two-layer GRU in one
// dispatch, as a wavefront: in interval i, layer 1 computes step t = T-1-i
// and layer 0 step t = T-i, so the two layers take T + 1 dependent intervals
// instead of 2T. Layer 0's gradient from above, d_h0[t] = d_gi1[t] · W_ih1
// (layer 1's input gradient), is computed here from the d_gi1[t] that layer 1
// wrote in the interval before (not by a GEMM afterwards), and written to d_h0.
//
// The tiling and arithmetic are gru_bwd_grid_cm's: workgroups 0 .. G-1 run
// layer 0 and G .. 2G-1 layer 1 (G = RB · H/16, RB = ceil(B/16)), each
// owning 16 rows × 16 units, its weight columns in registers as f16
// cooperative-matrix fragments; products are f16 × f16 → f32:
//   - layer 1: d_gh1[t+1] · W_hh1[:, units], its 96 K-tiles over 8 subgroups;
//   - layer 0: d_gi1[t] · W_ih1[:, units] on subgroups 0-3 and
//     d_gh0[t+1] · W_hh0[:, units] on subgroups 4-7, 96 K-tiles each.
// The f16 copies (d_gh0s, d_gh1s, d_gi1s; 16 rows of padding past T·B) are
// what the products read, staged through shared memory with coherent
// 16-byte loads (all of a step's issued at once), in rounds of 8 tiles.
// Everything stored besides them is f32, as gru_bwd_grid writes it.
//
// The dispatch walks intervals pc.t .. pc.t + pc.n - 1 with the grid-wide
// barrier of include/grid.glsl between them (pc.n = 1: one dispatch per
// interval). Needs subgroup size 32, H % 16 == 0, H <= 512, all workgroups
// resident at once (the engine checks).
// Parameter offsets: W_hh0 pc.off0, W_hh1 pc.off1, W_ih1 pc.off2.
// flag 1: no arithmetic, only pc.n - 1 grid barriers (the residency check).
//
// OPERANDS_NONCOHERENT (the variant gru_bwd_wave_cm_nc): the products' loads
// of d_gh0s, d_gh1s, d_gi1s without `coherent`, so that they may be served
// through the SM's L1 (step time 7.7 -> 6.5 µs at `bench` on the H200). Only
// for H % 64 == 0 (Engine::wave_noncoherent): a row (3H halves) is then whole
// 128-byte cache lines, and the 16 rows a workgroup reads belong to the step
// it reads or to later ones (partial row blocks), all written and made
// available before the last grid barrier, or to the padding, never written;
// so no line a load brings into L1 was there before its final value.
// Timing probes (Engine::probe_bwd_wave; what they write is meaningless):
// flag bit 2: the products' operands not loaded (zeros); 4: no products;
// 8: nothing stored after the products; 16: the step's own inputs not loaded.
#extension GL_GOOGLE_include_directive : enable
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"

#define SUBGROUPS 8u
// K-tiles per subgroup at most: layer 0 splits each of its products (3H/16
// = 96 K-tiles at H = 512) over 4 subgroups.
#define KT_MAX 24
// Tiles staged per subgroup at once.
#define KT_STAGE 8
#define ROUNDS (KT_MAX / KT_STAGE)
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh0 { float gh0[]; };
layout(std430, binding = 2) readonly buffer Gates0 { float gates0[]; };
layout(std430, binding = 3) readonly buffer H0 { float h0[]; };
layout(std430, binding = 4) writeonly buffer Dh0 { float d_h0[]; };
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
// Each subgroup's partial sums of the interval: [subgroup][row][unit].
shared float part[SUBGROUPS * 16u * 16u];

#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

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
    // This subgroup's product: layer 1 has one over 8 subgroups; layer 0 two
    // over 4 each (prod 0: d_gi1 · W_ih1, the gradient from above; 1: the
    // recurrent product).
    uint nsub = layer == 1u ? SUBGROUPS : SUBGROUPS / 2u;
    uint prod = layer == 1u ? 1u : sg / nsub;
    uint ss = sg % nsub;
    uint woff = layer == 1u ? pc.off1 : (prod == 0u ? pc.off2 : pc.off0);
    // The f16 copy it reads.
    uint src = layer == 1u ? 1u : (prod == 0u ? 2u : 0u);
    uint ntiles = (ktiles + nsub - 1u - ss) / nsub;
    uint rounds = (ntiles + KT_STAGE - 1u) / KT_STAGE;

    // The weight fragments: tile i is rows (K-tile) ss + nsub·i of W, the
    // workgroup's 16 columns (units contiguous in memory).
    FRAG_B wb[KT_MAX];
    uint sbase = sg * KT_STAGE * 32u;
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        uint kt = ss + nsub * i;
        if (kt >= ktiles) break;
        {
            uint e = lane;
            uint m = kt * 16u + e / 2u, u0 = (e & 1u) * 8u;
            uint w[4];
            [[unroll]] for (uint x = 0u; x < 4u; ++x) {
                uint ja = j0 + u0 + 2u * x;
                float a = ja < H ? p[woff + m * H + ja] : 0.0;
                float b = ja + 1u < H ? p[woff + m * H + ja + 1u] : 0.0;
                w[x] = packFloat2x16(f16vec2(a, b));
            }
            stg[sbase + e] = uvec4(w[0], w[1], w[2], w[3]);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        coopMatLoad(wb[i], stg, sbase, 2u, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
    }

    if (pc.flag == 1u) {
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    uint bl = lid / 16u, u = lid % 16u;
    uint b = rb * 16u + bl, j = j0 + u;
    bool mine = b < pc.B && j < H;
    uint rh = pc.T * pc.B * H;
    // The step of interval it: layer 1 t = T-1-it, layer 0 t = T-it.
    uint lag = layer == 0u ? 1u : 0u;
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
        uint row = t * pc.B + b;
        uint x = row * H + j;
        // The step's own inputs, loaded before the barrier.
        float v_dh = 0.0, v_r = 0.0, v_z = 0.0, v_n = 0.0, v_hp = 0.0, v_ghn = 0.0, v_znext = 0.0;
        if (on_step && mine && (pc.flag & 16u) == 0u) {
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
        if (it > pc.t) grid_sync(it - pc.t);
        if (!on_step) continue;
        // Layer 0's product from above reads d_gi1[t]; the recurrent ones
        // d_gh[t+1] (none at t = T-1).
        bool has_prod = (prod == 0u || above) && (pc.flag & 4u) == 0u;
        if (has_prod) {
            FRAG_C acc[3];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = FRAG_C(0.0);
            uint srow = prod == 0u ? t : t + 1u;
            uint a0 = (srow * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
            // Every load of the step is issued before the first is used.
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = ss + nsub * i;
                ld[i] = uvec4(0u);
                if (kt < ktiles && (pc.flag & 2u) == 0u) ld[i] = load8(src, a0 + kt * 16u);
            }
            [[unroll]] for (uint r = 0u; r < ROUNDS; ++r) {
                if (r >= rounds) break;
                if (r > 0u) subgroupBarrier();
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) stg[sbase + i * 32u + lane] = ld[r * KT_STAGE + i];
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) {
                    uint ti = r * KT_STAGE + i;
                    if (ss + nsub * ti < ktiles) {
                        FRAG_A ga;
                        coopMatLoad(ga, stg, sbase + i * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor);
                        acc[i % 3u] = coopMatMulAdd(ga, wb[ti], acc[i % 3u]);
                    }
                }
            }
            acc[0] = acc[0] + acc[1] + acc[2];
            coopMatStore(acc[0], part, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
        }
        barrier();
        if (mine) {
            float carry = 0.0;
            if (above) {
                float sum = 0.0;
                for (uint s = SUBGROUPS - nsub; s < SUBGROUPS; ++s) sum += part[s * 256u + bl * 16u + u];
                carry = dh_next * v_znext + sum;
            }
            if (layer == 0u) {
                for (uint s = 0u; s < nsub; ++s) v_dh += part[s * 256u + bl * 16u + u];
                d_h0[x] = v_dh;
            }
            float dh = v_dh + carry;
            float dn = dh * (1.0 - v_z);
            float dz = dh * (v_hp - v_n);
            float dan = dn * (1.0 - v_n * v_n);
            float dar = dan * v_ghn * v_r * (1.0 - v_r);
            float daz = dz * v_z * (1.0 - v_z);
            uint g = row * H3;
            if ((pc.flag & 8u) != 0u) {
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
        // The next interval's staging and partial sums overwrite this one's
        // only after every invocation has read them: grid_sync starts with
        // a barrier.
    }
}
