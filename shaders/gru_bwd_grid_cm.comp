#version 450
// The mixed-precision step's backpropagation through time on cooperative
// matrices, tiled like gru_fwd_grid_cm: workgroup g owns the 16 rows of row
// block g % RB (RB = ceil(B/16)) and the 16 units j0 = 16·(g / RB) ..
// j0 + 15, and keeps the columns j0 .. j0+15 of W_hh (all 3H rows) in
// registers as f16 fragments. At step t it needs
//   (d_gh[t+1] · W_hh)[rows, j0 .. j0+15]
// only for its own rows: it reads them from an f16 copy of d_gh (d_gh16)
// that each step writes beside the f32 d_gh. The rest is gru_bwd_grid's
// arithmetic in f32:
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// then the gate gradients of step t. The dispatch walks t = pc.t down to
// pc.t + 1 - pc.n, with a barrier of include/grid.glsl between steps that
// waits for the workgroups of the row block only (grid_sync_rows).
//
// Needs: subgroup size 32, H % 16 == 0, H <= 512, every workgroup resident
// at once. d_gh16 has 16 rows of padding past T·B (zeroed by the engine).
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H];
//   d_gh16 [T·B + 16, 3H].
// pc.flag (include/probe_bits.glsl): PROBE_BARRIERS_ONLY, no arithmetic, only
// pc.n - 1 grid barriers (the residency check). The lab's timing probes
// (Engine::probe_grid_cm; what they write is meaningless), only in the
// variant built with GRID_PROBE (gru_bwd_grid_cm_nc_probe): the product's
// operands not loaded (zeros), no product (nor its loads), nothing stored
// after the gates, the step's own inputs not loaded (PROBE_NO_OPERAND_LOADS,
// PROBE_NO_PRODUCTS, PROBE_NO_STORES, PROBE_NO_STEP_INPUTS).
#extension GL_GOOGLE_include_directive : enable
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#include "model.glsl"
#include "probe_bits.glsl"

#ifdef GRID_PROBE
#define PROBE pc.flag
#else
#define PROBE 0u
#endif
#define SUBGROUPS 8u
#ifdef OPERANDS_NONCOHERENT
// Whether this lane's row (lane / 2 of the row block) is a row of the batch.
#define LOAD_ROW (rb * 16u + lane / 2u < pc.B)
#else
#define LOAD_ROW true
#endif
// K-tiles per subgroup at most (H <= 512: 96 K-tiles of 3H over 8 subgroups).
#define KT_MAX 12
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) writeonly buffer Dgh { float d_gh[]; };
#define GRID_STATE_BINDING 8
#define GRID_SYNC_BINDING 9
#include "grid.glsl"
// d_gh16 as written (one f16 per invocation) and as read (8 values per load).
layout(std430, binding = 10) coherent buffer Dgh16 { float16_t d_gh16[]; };
#ifdef OPERANDS_NONCOHERENT
// gru_bwd_grid_cm_nc: the product's loads of d_gh[t+1] (the f16 copy) without `coherent`,
// so that they may be served through the SM's L1. Only where H % 64 == 0
// (Engine::grid_noncoherent): a row is then whole 128-byte lines (buffers
// start on a line); a step reads only rows of the step it reads, rows past B
// of a partial row block are not loaded, and every row it reads (of its own
// row block) was written by the workgroups it waited for at the last barrier
// and never read before: nothing stale to hit.
layout(std430, binding = 10) readonly buffer Dgh16v { uvec4 d_gh16v[]; };
#else
layout(std430, binding = 10) coherent buffer Dgh16v { uvec4 d_gh16v[]; };
#endif

// Tiles staged per subgroup at once: a step's 12 in two rounds.
#define KT_STAGE 6
// Shared memory, 32 KB in all:
// - stg: first W_hh[:, j0 .. j0+15] on its way into registers, 8 K-tiles at
//   a time ([m in band][16 units], 2 uvec4 per row); then each subgroup's
//   tiles of d_gh[t+1] on their way into fragments ([subgroup][tile][16 × 16],
//   32 uvec4 per tile). As in gru_fwd_grid_cm: coopMatLoad reads shared memory.
shared uvec4 stg[SUBGROUPS * KT_STAGE * 32u];
// Each subgroup's partial sums of the step: [subgroup][row][unit].
shared float part[SUBGROUPS * 16u * 16u];

#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint H = pc.H;
    uint H3 = 3u * H;
    uint rb_count = (pc.B + 15u) / 16u;
    uint rb = gl_WorkGroupID.x % rb_count;
    uint j0 = (gl_WorkGroupID.x / rb_count) * 16u;
    uint ktiles = H3 / 16u;

    // Subgroup sg holds the K-tiles (rows of W_hh) sg + 8·i.
    FRAG_B wb[KT_MAX];
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        if (8u * i >= ktiles) break;
        for (uint e = lid; e < 128u * 2u; e += 256u) {
            uint mm = e / 2u, u0 = (e & 1u) * 8u;
            uint m = 128u * i + mm;
            uint w[4];
            [[unroll]] for (uint c = 0u; c < 4u; ++c) {
                uint ja = j0 + u0 + 2u * c;
                float a = m < H3 && ja < H ? p[pc.off0 + m * H + ja] : 0.0;
                float b = m < H3 && ja + 1u < H ? p[pc.off0 + m * H + ja + 1u] : 0.0;
                w[c] = packFloat2x16(f16vec2(a, b));
            }
            stg[e] = uvec4(w[0], w[1], w[2], w[3]);
        }
        barrier();
        coopMatLoad(wb[i], stg, sg * 16u * 2u, 2u, gl_CooperativeMatrixLayoutRowMajor);
        barrier();
    }

    if (pc.flag == PROBE_BARRIERS_ONLY) {
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    uint bl = lid / 16u, u = lid % 16u;
    uint b = rb * 16u + bl, j = j0 + u;
    bool mine = b < pc.B && j < H;
    uint rh = pc.T * pc.B * H;
    float dh_next = 0.0;
    if (mine && pc.t + 1u < pc.T) dh_next = dh_tot[((pc.t + 1u) * pc.B + b) * H + j];
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        bool above = t + 1u < pc.T;
        uint row = t * pc.B + b;
        uint x = row * H + j;
        // The step's own inputs, loaded before the barrier.
        float v_dh = 0.0, v_r = 0.0, v_z = 0.0, v_n = 0.0, v_hp = 0.0, v_ghn = 0.0, v_znext = 0.0;
        if (mine && (PROBE & PROBE_NO_STEP_INPUTS) == 0u) {
            v_dh = d_h[x];
            v_r = gates[x];
            v_z = gates[rh + x];
            v_n = gates[2u * rh + x];
            v_hp = t > 0u ? h[x - pc.B * H] : 0.0;
            v_ghn = gh[row * H3 + 2u * H + j];
            v_znext = above ? gates[rh + x + pc.B * H] : 0.0;
        }
        // The barrier waits for this row block's workgroups only.
        if (s > 0u) grid_sync_rows(s, 0u, 1u, rb, rb_count, H / 16u, 0u);
        float carry = 0.0;
        if (above && (PROBE & PROBE_NO_PRODUCTS) != 0u) carry = dh_next * v_znext;
        if (above && (PROBE & PROBE_NO_PRODUCTS) == 0u) {
            // Three accumulators, so that the products do not wait on each other.
            FRAG_C acc[3];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = FRAG_C(0.0);
            // Lane l brings 8 values of row l/2 of each of its tiles; every
            // load of the step is issued before the first is stored.
            uint a0 = ((t + 1u) * pc.B + rb * 16u + lane / 2u) * H3 + (lane & 1u) * 8u;
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = sg + SUBGROUPS * i;
                ld[i] = uvec4(0u);
                if (kt < ktiles && LOAD_ROW && (PROBE & PROBE_NO_OPERAND_LOADS) == 0u) ld[i] = d_gh16v[(a0 + kt * 16u) >> 3];
            }
            [[unroll]] for (uint r = 0u; r < KT_MAX / KT_STAGE; ++r) {
                if (r > 0u) subgroupBarrier();
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) stg[(sg * KT_STAGE + i) * 32u + lane] = ld[r * KT_STAGE + i];
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (uint i = 0u; i < KT_STAGE; ++i) {
                    uint ti = r * KT_STAGE + i;
                    if (sg + SUBGROUPS * ti < ktiles) {
                        FRAG_A ga;
                        coopMatLoad(ga, stg, (sg * KT_STAGE + i) * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor);
                        acc[ti % 3u] = coopMatMulAdd(ga, wb[ti], acc[ti % 3u]);
                    }
                }
            }
            acc[0] = acc[0] + acc[1] + acc[2];
            coopMatStore(acc[0], part, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            barrier();
            if (mine) {
                float sum = 0.0;
                [[unroll]] for (uint q = 0u; q < SUBGROUPS; ++q) sum += part[q * 256u + bl * 16u + u];
                carry = dh_next * v_znext + sum;
            }
        }
        if (mine) {
            float dh = v_dh + carry;
            dh_next = dh;
            if ((PROBE & PROBE_NO_STORES) != 0u) continue;
            dh_tot[x] = dh;
            float dn = dh * (1.0 - v_z);
            float dz = dh * (v_hp - v_n);
            float dan = dn * (1.0 - v_n * v_n);
            float dar = dan * v_ghn * v_r * (1.0 - v_r);
            float daz = dz * v_z * (1.0 - v_z);
            uint g = row * H3;
            d_gi[g + j] = dar;
            d_gi[g + H + j] = daz;
            d_gi[g + 2u * H + j] = dan;
            d_gh[g + j] = dar;
            d_gh[g + H + j] = daz;
            d_gh[g + 2u * H + j] = dan * v_r;
            d_gh16[g + j] = float16_t(dar);
            d_gh16[g + H + j] = float16_t(daz);
            d_gh16[g + 2u * H + j] = float16_t(dan * v_r);
        }
    }
}
