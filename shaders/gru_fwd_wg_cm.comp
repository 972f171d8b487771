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
// COOPMAT: the product on cooperative matrices. Subgroup sg < 3H/16 owns the
// gate columns 16·sg .. 16·sg + 15 of W_hh^T and holds all H/16 of their
// K-tiles in registers as f16 fragments (8 at H = 128: 32 registers a
// lane); a step multiplies the f16 h_{t-1} of the 16 rows (shared) by them
// into a 16×16 tile of gh, stored to shared, then invocation (row, unit)
// applies the gates to its three columns.
// Without COOPMAT (lavapipe, tests): the same step with the product as f32
// FMAs over the same f16-rounded operands, each invocation summing its own
// three gate columns (W_hh read from the parameters each step); the sums
// are the same products added in another order.
//
// Shared memory: COOPMAT 8 KB (h_{t-1}, f16, two buffers) + 12 KB (W_hh^T's
// K-tile on its way into registers) + 24 KB (the step's 16 × 3H product);
// FMA: 16 KB (h_{t-1} as f32, two buffers).
// The dispatch runs steps pc.t .. pc.t + pc.n - 1 (chunks: the loop guard).
//   p: W_hh [3H, H] at off0, b_hh [3H] at off1 of the parameters
//   gi, gh: [T, B, 3H]; gates: [3][T, B, H]; h: [T, B, H]
#extension GL_GOOGLE_include_directive : enable
#extension GL_EXT_control_flow_attributes : require
#ifdef COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "model.glsl"
#include "f16_round.glsl"

#define WG 768u
#define HMAX 128u
// Gate columns at most (3 · HMAX) and K-tiles at most (HMAX / 16).
#define NCMAX 384u
#define KT_MAX 8
// (row, unit) pairs each invocation owns at most: ceil(16 · HMAX / WG).
#define PER 3
layout(local_size_x = 768) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gi { float gi[]; };
layout(std430, binding = 2) writeonly buffer Gh { float gh[]; };
layout(std430, binding = 3) writeonly buffer Gates { float gates[]; };
layout(std430, binding = 4) buffer Hs { float h[]; };

#ifdef COOPMAT
// h_{t-1} of the 16 rows in f16, [buffer][row][k] (rows past B zero).
shared float16_t hs[2u * 16u * HMAX];
// One K-tile of W_hh^T in f16, [k][column].
shared float16_t wst[16u * NCMAX];
// The step's product, [row][column].
shared float ghs[16u * NCMAX];
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define HS_PUT(i, v) hs[i] = float16_t(v)
#else
// h_{t-1} of the rows rounded to f16, as f32, [buffer][row][k].
shared float hs[2u * 16u * HMAX];
#define HS_PUT(i, v) hs[i] = round_f16(v)
#endif

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint ktiles = H / 16u;

#ifdef COOPMAT
    uint sg = gl_SubgroupID;
    uint nct = H3 / 16u;
    FRAG_B wb[KT_MAX];
    [[unroll]] for (uint kt = 0u; kt < KT_MAX; ++kt) {
        if (kt >= ktiles) break;
        for (uint e = lid; e < 16u * H3; e += WG) {
            uint kk = e / H3, c = e - kk * H3;
            wst[e] = float16_t(p[pc.off0 + c * H + 16u * kt + kk]);
        }
        barrier();
        if (sg < nct) coopMatLoad(wb[kt], wst, sg * 16u, H3, gl_CooperativeMatrixLayoutRowMajor);
        barrier();
    }
#endif

    // The pairs (row, unit) of this invocation: e = lid + WG·i, row e / H.
    uint prev = 0u;
    vec3 bias[PER];
    float hp[PER];
    [[unroll]] for (uint i = 0u; i < PER; ++i) {
        uint e = lid + WG * uint(i);
        uint b = e / H, j = e - b * H;
        bias[i] = vec3(0.0);
        hp[i] = 0.0;
        if (b < 16u) {
            float v = 0.0;
            if (b < B) {
                bias[i] = vec3(p[pc.off1 + j], p[pc.off1 + H + j], p[pc.off1 + 2u * H + j]);
                if (pc.t > 0u) v = h[((pc.t - 1u) * B + b) * H + j];
            }
            hp[i] = v;
            // Both buffers: rows past B stay zero.
            HS_PUT(b * H + j, v);
            HS_PUT(16u * H + b * H + j, 0.0);
        }
    }
    barrier();

    uint rh = pc.T * B * H;
    uint t_end = min(pc.T, pc.t + pc.n);
    // gi of the step, loaded one step ahead: the load's latency overlaps
    // the previous step's barrier and product instead of adding to them.
    vec3 gnext[PER];
    [[unroll]] for (uint i = 0u; i < PER; ++i) {
        uint e = lid + WG * uint(i);
        uint b = e / H, j = e - b * H;
        gnext[i] = vec3(0.0);
        if (b < B && pc.t < t_end) {
            uint g = (pc.t * B + b) * H3;
            gnext[i] = vec3(gi[g + j], gi[g + H + j], gi[g + 2u * H + j]);
        }
    }
    for (uint t = pc.t; t < t_end; ++t) {
        uint cur = prev ^ 1u;
        uint po = prev * 16u * H, co = cur * 16u * H;
#ifdef COOPMAT
        if (t > 0u) {
            if (sg < nct) {
                FRAG_C acc = FRAG_C(0.0);
                [[unroll]] for (uint kt = 0u; kt < KT_MAX; ++kt) {
                    if (kt < ktiles) {
                        FRAG_A xa;
                        coopMatLoad(xa, hs, po + kt * 16u, H, gl_CooperativeMatrixLayoutRowMajor);
                        acc = coopMatMulAdd(xa, wb[kt], acc);
                    }
                }
                coopMatStore(acc, ghs, sg * 16u, H3, gl_CooperativeMatrixLayoutRowMajor);
            }
            barrier();
        }
#endif
        [[unroll]] for (uint i = 0u; i < PER; ++i) {
            uint e = lid + WG * uint(i);
            uint b = e / H, j = e - b * H;
            if (b >= B) continue;
            uint row = t * B + b;
            uint g = row * H3;
            vec3 gin = gnext[i];
            if (t + 1u < t_end) {
                uint gn = g + B * H3;
                gnext[i] = vec3(gi[gn + j], gi[gn + H + j], gi[gn + 2u * H + j]);
            }
            vec3 m = vec3(0.0);
            if (t > 0u) {
#ifdef COOPMAT
                uint o = b * H3 + j;
                m = vec3(ghs[o], ghs[o + H], ghs[o + 2u * H]);
#else
                uint hrow = po + b * H;
                for (uint k = 0u; k < H; ++k) {
                    float x = hs[hrow + k];
                    uint w = pc.off0 + j * H + k;
                    m += x * vec3(round_f16(p[w]), round_f16(p[w + H * H]), round_f16(p[w + 2u * H * H]));
                }
#endif
            }
            vec3 ghv = m + bias[i];
            float r = sigmoid(gin.x + ghv.x);
            float z = sigmoid(gin.y + ghv.y);
            float n = tanh_safe(gin.z + r * ghv.z);
            gh[g + j] = ghv.x;
            gh[g + H + j] = ghv.y;
            gh[g + 2u * H + j] = ghv.z;
            gates[row * H + j] = r;
            gates[rh + row * H + j] = z;
            gates[2u * rh + row * H + j] = n;
            hp[i] = (1.0 - z) * n + z * hp[i];
            h[row * H + j] = hp[i];
            HS_PUT(co + b * H + j, hp[i]);
        }
        // h_t is complete (and, COOPMAT, every read of ghs done) before the
        // next step's product.
        barrier();
        prev = cur;
    }
}
