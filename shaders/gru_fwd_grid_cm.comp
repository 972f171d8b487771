#version 450
// The mixed-precision step's GRU forward recurrence on cooperative matrices,
// spread over the device like gru_fwd_grid but tiled by rows as well as
// units: workgroup g owns the 16 rows of row block g % RB (RB = ceil(B/16))
// and the 16 hidden units j0 = 16·(g / RB) .. j0 + 15. Its slice of W_hh
// (48 rows: gates r, z, n of its 16 units) stays in registers as f16
// cooperative-matrix fragments for the whole dispatch, so a step only takes
// in h_{t-1} of its own 16 rows: an f16 copy (h16) that the step writes
// beside the f32 h. The product is f16 × f16 with f32 accumulation, as in
// the mixed step's GEMMs; the gates, h and everything stored are f32 as in
// gru_fwd_grid.
//
// A step: each of the 8 subgroups multiplies its K-tiles (kt = sg, sg + 8,
// ...) of h_{t-1}[rows, :] by its fragments of W_hh^T into a 16×48 partial
// sum and stores it in shared memory; invocation (row, unit) then sums the 8
// partials of its three gate columns and applies the gates.
// Between steps, a barrier of include/grid.glsl that waits for the
// workgroups of the row block only (grid_sync_rows).
//
// Needs: subgroup size 32, H % 16 == 0, H <= 512, and every workgroup
// resident at once (the engine checks, as for gru_fwd_grid). The f16 copy has
// 16 rows of padding past T·B: a partial row block reads rows it discards.
//   p: W_hh [3H, H] at off0, b_hh [3H] at off1 of the parameters
//   gi, gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]; h16: [T·B + 16, H]
// pc.flag (include/probe_bits.glsl): PROBE_BARRIERS_ONLY, no arithmetic, only
// pc.n - 1 grid barriers (the residency check). The lab's timing probes
// (Engine::probe_grid_cm; what they write is meaningless), only in the
// variant built with GRID_PROBE (gru_fwd_grid_cm_nc_probe): the product's
// operands not loaded (zeros), no product (nor its loads), nothing stored
// after the gates, the step's own inputs (gi) not loaded (PROBE_NO_OPERAND_LOADS,
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
// K-tiles per subgroup at most (H <= 512: 32 K-tiles over 8 subgroups).
#define KT_MAX 4
// Gate columns of the workgroup: 3 gates × 16 units.
#define NC 48u
#ifdef OPERANDS_NONCOHERENT
// Whether this lane's row (lane / 2 of the row block) is a row of the batch.
#define LOAD_ROW (rb * 16u + lane / 2u < pc.B)
#else
#define LOAD_ROW true
#endif
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
layout(std430, binding = 4) buffer Hs { float h[]; };
#define GRID_STATE_BINDING 5
#define GRID_SYNC_BINDING 6
#include "grid.glsl"
// h16 as written (one f16 per invocation) and as read (8 values per load).
layout(std430, binding = 7) coherent buffer H16 { float16_t h16[]; };
#ifdef OPERANDS_NONCOHERENT
// gru_fwd_grid_cm_nc: the product's loads of h_{t-1} (the f16 copy) without `coherent`,
// so that they may be served through the SM's L1. Only where H % 64 == 0
// (Engine::grid_noncoherent): a row is then whole 128-byte lines (buffers
// start on a line); a step reads only rows of the step it reads, rows past B
// of a partial row block are not loaded, and every row it reads (of its own
// row block) was written by the workgroups it waited for at the last barrier
// and never read before: nothing stale to hit.
layout(std430, binding = 7) readonly buffer H16v { uvec4 h16v[]; };
#else
layout(std430, binding = 7) coherent buffer H16v { uvec4 h16v[]; };
#endif

// Shared memory, 40 KB in all:
// - stg: first the W_hh^T slice on its way into registers, one band of 8
//   K-tiles at a time ([k in band][column], column = gate·16 + unit, 8
//   values per uvec4); then each subgroup's tiles of h_{t-1} on their way
//   into fragments ([subgroup][tile][16 rows × 16], 32 uvec4 per tile).
//   coopMatLoad reads shared memory; from global memory marked coherent it
//   was slower than the f32 kernel (docs/speed.md).
shared uvec4 stg[SUBGROUPS * KT_MAX * 32u];
// Each subgroup's partial sums of the step: [subgroup][row][column].
shared float part[SUBGROUPS * 16u * NC];

#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint H = pc.H;
    uint rb_count = (pc.B + 15u) / 16u;
    uint rb = gl_WorkGroupID.x % rb_count;
    uint j0 = (gl_WorkGroupID.x / rb_count) * 16u;
    uint ktiles = H / 16u;

    // The fragments of W_hh^T: subgroup sg holds K-tiles sg + 8·i, all
    // three gate tiles of each.
    FRAG_B wb[KT_MAX][3];
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        // Band i holds K-tiles 8i .. 8i + 7 (k = 128i .. 128i + 127).
        if (8u * i >= ktiles) break;
        for (uint e = lid; e < 128u * (NC / 8u); e += 256u) {
            uint kk = e / (NC / 8u), c0 = (e - kk * (NC / 8u)) * 8u;
            uint k = 128u * i + kk;
            uint q = c0 / 16u, u0 = c0 - q * 16u;
            uint row0 = pc.off0 + (q * H + j0 + u0) * H + k;
            uint w[4];
            [[unroll]] for (uint c = 0u; c < 4u; ++c) {
                float a = k < H ? p[row0 + 2u * c * H] : 0.0;
                float b = k < H ? p[row0 + (2u * c + 1u) * H] : 0.0;
                w[c] = packFloat2x16(f16vec2(a, b));
            }
            stg[e] = uvec4(w[0], w[1], w[2], w[3]);
        }
        barrier();
        [[unroll]] for (uint q = 0u; q < 3u; ++q)
            coopMatLoad(wb[i][q], stg, (sg * 16u) * (NC / 8u) + q * 2u, NC / 8u, gl_CooperativeMatrixLayoutRowMajor);
        barrier();
    }

    if (pc.flag == PROBE_BARRIERS_ONLY) {
        for (uint k = 1u; k < pc.n; ++k) grid_sync(k);
        return;
    }

    // Invocation (row, unit) of the gate step.
    uint bl = lid / 16u, u = lid % 16u;
    uint b = rb * 16u + bl, j = j0 + u;
    bool mine = b < pc.B && j < H;
    vec3 bias = vec3(0.0);
    float hp = 0.0;
    if (mine) {
        bias = vec3(p[pc.off1 + j], p[pc.off1 + H + j], p[pc.off1 + 2u * H + j]);
        if (pc.t > 0u) hp = h[((pc.t - 1u) * pc.B + b) * H + j];
    }
    uint rh = pc.T * pc.B * H;
    uint t_end = min(pc.T, pc.t + pc.n);
    for (uint t = pc.t; t < t_end; ++t) {
        uint row = t * pc.B + b;
        vec3 gin = vec3(0.0);
        if (mine && (PROBE & PROBE_NO_STEP_INPUTS) == 0u) {
            uint g = row * 3u * H;
            gin = vec3(gi[g + j], gi[g + H + j], gi[g + 2u * H + j]);
        }
        // The barrier waits for this row block's workgroups only.
        if (t > pc.t) grid_sync_rows(t - pc.t, 0u, 1u, rb, rb_count, H / 16u, 0u);
        vec3 m = vec3(0.0);
        if (t > 0u && (PROBE & PROBE_NO_PRODUCTS) == 0u) {
            FRAG_C acc[3];
            [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = FRAG_C(0.0);
            // Lane l brings 8 values of row l/2 of each of its tiles; every
            // load of the step is issued before the first is stored.
            uint a0 = ((t - 1u) * pc.B + rb * 16u + lane / 2u) * H + (lane & 1u) * 8u;
            uvec4 ld[KT_MAX];
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = sg + SUBGROUPS * i;
                ld[i] = uvec4(0u);
                if (kt < ktiles && LOAD_ROW && (PROBE & PROBE_NO_OPERAND_LOADS) == 0u) ld[i] = h16v[(a0 + kt * 16u) >> 3];
            }
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) stg[(sg * KT_MAX + i) * 32u + lane] = ld[i];
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                uint kt = sg + SUBGROUPS * i;
                if (kt < ktiles) {
                    FRAG_A xa;
                    coopMatLoad(xa, stg, (sg * KT_MAX + i) * 32u, 2u, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint q = 0u; q < 3u; ++q) acc[q] = coopMatMulAdd(xa, wb[i][q], acc[q]);
                }
            }
            [[unroll]] for (uint q = 0u; q < 3u; ++q)
                coopMatStore(acc[q], part, sg * 16u * NC + q * 16u, NC, gl_CooperativeMatrixLayoutRowMajor);
            barrier();
            if (mine) {
                [[unroll]] for (uint s = 0u; s < SUBGROUPS; ++s) {
                    uint o = (s * 16u + bl) * NC + u;
                    m += vec3(part[o], part[o + 16u], part[o + 32u]);
                }
            }
        }
        if (mine) {
            vec3 ghv = m + bias;
            float r = sigmoid(gin.x + ghv.x);
            float z = sigmoid(gin.y + ghv.y);
            float n = tanh_safe(gin.z + r * ghv.z);
            hp = (1.0 - z) * n + z * hp;
            if ((PROBE & PROBE_NO_STORES) != 0u) continue;
            uint g = row * 3u * H;
            gh[g + j] = ghv.x;
            gh[g + H + j] = ghv.y;
            gh[g + 2u * H + j] = ghv.z;
            gates[row * H + j] = r;
            gates[rh + row * H + j] = z;
            gates[2u * rh + row * H + j] = n;
            h[row * H + j] = hp;
            h16[row * H + j] = float16_t(hp);
        }
        // The next step's staging and partial sums overwrite this step's
        // only after every invocation has read them (grid_sync starts with
        // a barrier; the last step needs none).
    }
}
