#version 450
// One layer's GRU forward recurrence of the mixed step in ONE workgroup of
// 768 invocations (24 subgroups: one per gate-column tile at H = 128; at
// most 85 registers a lane on NVIDIA, where 1024 would leave 64), for small
// layers: B <= 16 rows (one 16-row block) and H <= 128 units, H % 16 == 0.
// No grid barrier: h_{t-1} goes from step to step through shared memory and
// the steps are separated by workgroup barriers only. Same buffers and
// contract as gru_fwd_grid_cm (gh, gates, h in f32; the product f16 × f16
// with f32 accumulation, h_{t-1} and W_hh rounded to true f16), without its
// f16 copy of h, which only the grid kernels read.
//
// gru_fwd_wg_cm: the product on cooperative matrices. Subgroup sg < 3H/16 owns the
// gate columns 16·sg .. 16·sg + 15 of W_hh^T and holds all H/16 of their
// K-tiles in registers as f16 fragments (8 at H = 128: 32 registers a
// lane); a step multiplies the f16 h_{t-1} of the 16 rows (shared) by them
// into a 16×16 tile of gh, stored to shared, then invocation (row, unit)
// applies the gates to its three columns.
// FMA_PRODUCTS (gru_fwd_wg_fma; lavapipe, tests): the same step with the product as f32
// FMAs over the same f16-rounded operands, each invocation summing its own
// three gate columns (W_hh read from the parameters each step); the sums
// are the same products added in another order.
//
// No arrays of registers: every fragment and every pair's state is its own
// variable, named in the code, so the driver keeps them in registers. As
// arrays, indexed in loops it did not unroll, they lived in local memory
// (112 B an invocation here, 320 B in the backward).
//
// Shared memory: on cooperative matrices 8.5 KB (h_{t-1}, f16, two buffers) + 12 KB (W_hh^T's
// K-tile on its way into registers) + 24.3 KB (the step's 16 × 3H product);
// FMA: 17 KB (h_{t-1} as f32, two buffers).
// The dispatch runs steps pc.t .. pc.t + pc.n - 1 (chunks: the loop guard).
// pc.flag: 0 in a step; the lab's timing probe (Engine::probe_wg) switches
// parts off, results meaningless (include/probe_bits.glsl): no product, no
// stores to memory, no loads of gi, no barriers in the steps
// (PROBE_WG_NO_PRODUCT, _NO_STORES, _NO_INPUTS, _NO_BARRIERS).
//   p: W_hh [3H, H] at off0, b_hh [3H] at off1 of the parameters
//   gi, gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]
#extension GL_GOOGLE_include_directive : enable
#extension GL_EXT_control_flow_attributes : require
#ifndef FMA_PRODUCTS
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "model.glsl"
#include "probe_bits.glsl"
#include "f16_round.glsl"

#define WG 768u
#define HMAX 128u
// Gate columns at most (3 · HMAX). K-tiles at most HMAX / 16 = 8 (wb0..wb7);
// (row, unit) pairs an invocation owns at most ceil(16 · HMAX / WG) = 3.
#define NCMAX 384u
// Shared rows padded by 16 bytes: the product's 16-row tiles read h_{t-1}
// (f16, row HS_STRIDE) and write ghs (f32, row GS_STRIDE); unpadded, their
// rows of 256 and 1536 bytes all start in the same bank.
#define HS_STRIDE (pc.H + 8u)
#define GS_STRIDE (3u * pc.H + 4u)
layout(local_size_x = 768) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
layout(std430, binding = 4) buffer Hs { float h[]; };

#ifndef FMA_PRODUCTS
// h_{t-1} of the 16 rows in f16, [buffer][row][k] (rows past B zero).
shared float16_t hs[2u * 16u * (HMAX + 8u)];
// One K-tile of W_hh^T in f16, [k][column].
shared float16_t wst[16u * NCMAX];
// The step's product, [row][column].
shared float ghs[16u * (NCMAX + 4u)];
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define HS_PUT(i, v) hs[i] = float16_t(v)
#else
// h_{t-1} of the rows rounded to f16, as f32, [buffer][row][k].
shared float hs[2u * 16u * (HMAX + 8u)];
#define HS_PUT(i, v) hs[i] = round_f16(v)
#endif

// Pair e = lid + WG·i of this invocation: its bias and h_{t-1} at the
// chunk's start (both shared buffers of h written; rows past B stay zero).
void pair_init(uint e, out vec3 bias, out float hp) {
    uint H = pc.H, B = pc.B;
    uint b = e / H, j = e - b * H;
    bias = vec3(0.0);
    hp = 0.0;
    if (b < 16u) {
        float v = 0.0;
        if (b < B) {
            bias = vec3(p[pc.off1 + j], p[pc.off1 + H + j], p[pc.off1 + 2u * H + j]);
            if (pc.t > 0u) v = h[((pc.t - 1u) * B + b) * H + j];
        }
        hp = v;
        HS_PUT(b * HS_STRIDE + j, v);
        HS_PUT(16u * HS_STRIDE + b * HS_STRIDE + j, 0.0);
    }
}

// gi of pair e at step t (zero past B or past the chunk).
vec3 pair_gi(uint e, uint t, uint t_end) {
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint b = e / H, j = e - b * H;
    if (b >= B || t >= t_end || (pc.flag & PROBE_WG_NO_INPUTS) != 0u) return vec3(0.0);
    uint g = (t * B + b) * H3;
    return vec3(gi[g + j], gi[g + H + j], gi[g + 2u * H + j]);
}

// Step t of pair e: the gates from gi (loaded a step ahead; the next step's
// load issued here) and the product in ghs (cooperative matrices) or summed here (FMA).
void pair_step(uint e, uint t, uint t_end, uint po, uint co, inout vec3 gnext, vec3 bias, inout float hp) {
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint b = e / H, j = e - b * H;
    if (b >= B) return;
    uint rh = pc.T * B * H;
    uint row = t * B + b;
    uint g = row * H3;
    vec3 gin = gnext;
    gnext = pair_gi(e, t + 1u, t_end);
    vec3 m = vec3(0.0);
    if (t > 0u && (pc.flag & PROBE_WG_NO_PRODUCT) == 0u) {
#ifndef FMA_PRODUCTS
        uint o = b * GS_STRIDE + j;
        m = vec3(ghs[o], ghs[o + H], ghs[o + 2u * H]);
#else
        uint hrow = po + b * HS_STRIDE;
        for (uint k = 0u; k < H; ++k) {
            float x = hs[hrow + k];
            uint w = pc.off0 + j * H + k;
            m += x * vec3(round_f16(p[w]), round_f16(p[w + H * H]), round_f16(p[w + 2u * H * H]));
        }
#endif
    }
    vec3 ghv = m + bias;
    float r = sigmoid(gin.x + ghv.x);
    float z = sigmoid(gin.y + ghv.y);
    float n = tanh_safe(gin.z + r * ghv.z);
    hp = (1.0 - z) * n + z * hp;
    if ((pc.flag & PROBE_WG_NO_STORES) == 0u) {
        gh[g + j] = ghv.x;
        gh[g + H + j] = ghv.y;
        gh[g + 2u * H + j] = ghv.z;
        gates[row * H + j] = r;
        gates[rh + row * H + j] = z;
        gates[2u * rh + row * H + j] = n;
        h[row * H + j] = hp;
    }
    HS_PUT(co + b * HS_STRIDE + j, hp);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H, H3 = 3u * H;
    uint ktiles = H / 16u;

#ifndef FMA_PRODUCTS
    uint sg = gl_SubgroupID;
    uint nct = H3 / 16u;
    FRAG_B wb0 = FRAG_B(0.0); FRAG_B wb1 = FRAG_B(0.0); FRAG_B wb2 = FRAG_B(0.0); FRAG_B wb3 = FRAG_B(0.0);
    FRAG_B wb4 = FRAG_B(0.0); FRAG_B wb5 = FRAG_B(0.0); FRAG_B wb6 = FRAG_B(0.0); FRAG_B wb7 = FRAG_B(0.0);
// K-tile KT of W_hh^T staged in shared memory, this subgroup's fragment of it into W.
#define LOAD_KT(W, KT) \
    if (KT < ktiles) { \
        for (uint e = lid; e < 16u * H3; e += WG) { \
            uint kk = e / H3, c = e - kk * H3; \
            wst[e] = float16_t(p[pc.off0 + c * H + 16u * KT + kk]); \
        } \
        barrier(); \
        if (sg < nct) coopMatLoad(W, wst, sg * 16u, H3, gl_CooperativeMatrixLayoutRowMajor); \
        barrier(); \
    }
    LOAD_KT(wb0, 0u) LOAD_KT(wb1, 1u) LOAD_KT(wb2, 2u) LOAD_KT(wb3, 3u)
    LOAD_KT(wb4, 4u) LOAD_KT(wb5, 5u) LOAD_KT(wb6, 6u) LOAD_KT(wb7, 7u)
#endif

    // PER = 3 pairs (row, unit) an invocation: e = lid, lid + WG, lid + 2·WG.
    uint e0 = lid, e1 = lid + WG, e2 = lid + 2u * WG;
    vec3 bias0, bias1, bias2;
    float hp0, hp1, hp2;
    pair_init(e0, bias0, hp0);
    pair_init(e1, bias1, hp1);
    pair_init(e2, bias2, hp2);
    barrier();

    uint t_end = min(pc.T, pc.t + pc.n);
    // gi of the step, loaded one step ahead: the load's latency overlaps
    // the previous step's barrier and product instead of adding to them.
    vec3 gn0 = pair_gi(e0, pc.t, t_end), gn1 = pair_gi(e1, pc.t, t_end), gn2 = pair_gi(e2, pc.t, t_end);
    uint prev = 0u;
    for (uint t = pc.t; t < t_end; ++t) {
        uint cur = prev ^ 1u;
        uint po = prev * 16u * HS_STRIDE, co = cur * 16u * HS_STRIDE;
#ifndef FMA_PRODUCTS
        bool sync = (pc.flag & PROBE_WG_NO_BARRIERS) == 0u;
        if (t > 0u && (pc.flag & PROBE_WG_NO_PRODUCT) == 0u) {
            if (sg < nct) {
                FRAG_C acc = FRAG_C(0.0);
                FRAG_A xa;
// h_{t-1}'s K-tile KT times this subgroup's fragment W, into acc (in K order).
#define MUL_KT(W, KT) \
                if (KT < ktiles) { \
                    coopMatLoad(xa, hs, po + KT * 16u, HS_STRIDE, gl_CooperativeMatrixLayoutRowMajor); \
                    acc = coopMatMulAdd(xa, W, acc); \
                }
                MUL_KT(wb0, 0u) MUL_KT(wb1, 1u) MUL_KT(wb2, 2u) MUL_KT(wb3, 3u)
                MUL_KT(wb4, 4u) MUL_KT(wb5, 5u) MUL_KT(wb6, 6u) MUL_KT(wb7, 7u)
                coopMatStore(acc, ghs, sg * 16u, GS_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
            }
            if (sync) barrier();
        }
#endif
        pair_step(e0, t, t_end, po, co, gn0, bias0, hp0);
        pair_step(e1, t, t_end, po, co, gn1, bias1, hp1);
        pair_step(e2, t, t_end, po, co, gn2, bias2, hp2);
        // h_t is complete (and, on cooperative matrices, every read of ghs done) before the
        // next step's product.
        if ((pc.flag & PROBE_WG_NO_BARRIERS) == 0u) barrier();
        prev = cur;
    }
}
