#version 450
// One layer's backpropagation through time of the mixed step in ONE
// workgroup of 512 invocations (16 subgroups; up to 128 registers a lane on
// NVIDIA, for the 12 fragments of W_hh and two accumulators), for small
// layers (B <= 16, H <= 128, H % 16 == 0): the arithmetic and the buffers of gru_bwd_grid_cm, with
// d_gh[t+1] going from step to step through shared memory (f16, as the grid
// kernel's d_gh16 copy rounds it) and workgroup barriers only:
//   dh_t = d_h[t] + dh_{t+1} ⊙ z_{t+1} + (d_gh[t+1] · W_hh)[:, j]
// then the gate gradients of step t (d_gi, d_gh, dh_tot in f32).
//
// COOPMAT: the product on cooperative matrices. Subgroup sg (of 16) owns the
// unit tile ct = sg % 8 (units 16·ct .. 16·ct + 15) and the K-tiles (rows of
// W_hh) ks + 2i, ks = sg / 8: 12 f16 fragments at H = 128 (48 registers a
// lane). Its 16×16 partial sum goes to shared memory; invocation
// (row, unit) adds the two halves.
// Without COOPMAT (lavapipe, tests): the same step with the product as f32
// FMAs over the same f16-rounded operands (W_hh read from the parameters
// each step), each invocation summing its own unit over all 3H rows.
//
// Shared memory: COOPMAT 24 KB (d_gh[t+1] and d_gh[t], f16, 16 × 3H each;
// the second also stages W_hh on its way into registers) + 16 KB (the two
// halves' partial sums, 16 × H each); FMA: 24 KB (d_gh[t+1] rounded to f16,
// as f32, 16 × 3H).
// The dispatch walks t = pc.t down to pc.t + 1 - pc.n.
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H].
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

#define WG 512u
#define HMAX 128u
#define NCMAX 384u
// K-tiles per subgroup at most: 3·HMAX/16 over 2.
#define KT_MAX 12
// (row, unit) pairs each invocation owns at most: ceil(16 · HMAX / WG).
#define PER 4
layout(local_size_x = 512) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) buffer Dgh { float d_gh[]; };

#ifdef COOPMAT
// d_gh of the 16 rows in f16, [buffer][row][m] (rows past B zero).
shared float16_t dg[2u * 16u * NCMAX];
// The two halves' partial sums, [half][row][unit].
shared float part[2u * 16u * HMAX];
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define DG_PUT(i, v) dg[i] = float16_t(v)
#define DG_BUFS 2u
#else
// d_gh[t+1] of the rows rounded to f16, as f32, [row][m].
shared float dg[16u * NCMAX];
#define DG_PUT(i, v) dg[i] = round_f16(v)
#define DG_BUFS 1u
#endif

// A step's own inputs for (row b, unit j) at t: d_h, r, z, n, h_{t-1}, gh_n.
struct StepIn { float dh, r, z, n, hp, ghn; };
StepIn fetch(uint t, uint b, uint j) {
    uint H = pc.H, B = pc.B;
    uint rh = pc.T * B * H;
    uint row = t * B + b, x = row * H + j;
    StepIn q;
    q.dh = d_h[x];
    q.r = gates[x];
    q.z = gates[rh + x];
    q.n = gates[2u * rh + x];
    q.hp = t > 0u ? h[x - B * H] : 0.0;
    q.ghn = gh[row * 3u * H + 2u * H + j];
    return q;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint ktiles = H3 / 16u;
    uint rh = pc.T * B * H;

#ifdef COOPMAT
    uint sg = gl_SubgroupID;
    uint ct = sg % 8u, ks = sg / 8u;
    bool mult = ct < H / 16u;
    // K-tile kt = ks + 2i of W_hh (rows 16kt .. 16kt + 15, all units) staged
    // in the second d_gh buffer, [row in tile][unit].
    FRAG_B wb[KT_MAX];
    [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
        [[unroll]] for (uint half_ = 0u; half_ < 2u; ++half_) {
            uint kt = half_ + 2u * i;
            if (kt < ktiles) {
                for (uint e = lid; e < 16u * H; e += WG)
                    dg[16u * NCMAX + e] = float16_t(p[pc.off0 + 16u * kt * H + e]);
                barrier();
                if (mult && ks == half_)
                    coopMatLoad(wb[i], dg, 16u * NCMAX + ct * 16u, H, gl_CooperativeMatrixLayoutRowMajor);
                barrier();
            }
        }
    }
#endif

    // d_gh[t+1] (the chunk's first step's operand) and dh_{t+1}, from memory.
    bool first_above = pc.t + 1u < pc.T;
    float dh_next[PER];
    for (uint e = lid; e < 16u * H3; e += WG) {
        uint b = e / H3;
        float v = 0.0;
        if (b < B && first_above) v = d_gh[((pc.t + 1u) * B + b) * H3 + e - b * H3];
        DG_PUT(e, v);
#ifdef COOPMAT
        DG_PUT(16u * NCMAX + e, 0.0);
#endif
    }
    // The step's inputs are loaded one step ahead, so that their latency
    // overlaps the previous step's barrier and product; z_{t+1} is the
    // previous step's z (at the chunk's start, from memory).
    StepIn qn[PER];
    float z_next[PER];
    [[unroll]] for (uint i = 0u; i < PER; ++i) {
        uint e = lid + WG * uint(i);
        uint b = e / H, j = e - b * H;
        dh_next[i] = 0.0;
        z_next[i] = 0.0;
        if (b < B && first_above) {
            uint x = ((pc.t + 1u) * B + b) * H + j;
            dh_next[i] = dh_tot[x];
            z_next[i] = gates[rh + x];
        }
        if (b < B && pc.n > 0u) qn[i] = fetch(pc.t, b, j);
    }
    barrier();

    uint prev = 0u;
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        bool above = t + 1u < pc.T;
        uint cur = (prev + 1u) % DG_BUFS;
        uint po = prev * 16u * NCMAX, co = cur * 16u * NCMAX;
#ifdef COOPMAT
        if (above) {
            if (mult) {
                // Two accumulators, so that the products do not wait on each other.
                FRAG_C acc[2];
                acc[0] = FRAG_C(0.0);
                acc[1] = FRAG_C(0.0);
                [[unroll]] for (uint i = 0u; i < KT_MAX; ++i) {
                    uint kt = ks + 2u * i;
                    if (kt < ktiles) {
                        FRAG_A ga;
                        coopMatLoad(ga, dg, po + kt * 16u, H3, gl_CooperativeMatrixLayoutRowMajor);
                        acc[i % 2u] = coopMatMulAdd(ga, wb[i], acc[i % 2u]);
                    }
                }
                acc[0] = acc[0] + acc[1];
                coopMatStore(acc[0], part, ks * 16u * H + ct * 16u, H, gl_CooperativeMatrixLayoutRowMajor);
            }
            barrier();
        }
#endif
#ifndef COOPMAT
        float res[PER][3];
#endif
        [[unroll]] for (uint i = 0u; i < PER; ++i) {
            uint e = lid + WG * uint(i);
            uint b = e / H, j = e - b * H;
#ifndef COOPMAT
            res[i][0] = 0.0;
            res[i][1] = 0.0;
            res[i][2] = 0.0;
#endif
            if (b >= B) continue;
            StepIn q = qn[i];
            if (s + 1u < pc.n) qn[i] = fetch(t - 1u, b, j);
            uint row = t * B + b;
            uint x = row * H + j;
            float carry = 0.0;
            if (above) {
                float sum = 0.0;
#ifdef COOPMAT
                sum = part[b * H + j] + part[16u * H + b * H + j];
#else
                uint drow = po + b * H3;
                for (uint m = 0u; m < H3; ++m) sum += dg[drow + m] * round_f16(p[pc.off0 + m * H + j]);
#endif
                carry = dh_next[i] * z_next[i] + sum;
            }
            float dh = q.dh + carry;
            dh_tot[x] = dh;
            float dn = dh * (1.0 - q.z);
            float dz = dh * (q.hp - q.n);
            float dan = dn * (1.0 - q.n * q.n);
            float dar = dan * q.ghn * q.r * (1.0 - q.r);
            float daz = dz * q.z * (1.0 - q.z);
            uint g = row * H3;
            d_gi[g + j] = dar;
            d_gi[g + H + j] = daz;
            d_gi[g + 2u * H + j] = dan;
            d_gh[g + j] = dar;
            d_gh[g + H + j] = daz;
            d_gh[g + 2u * H + j] = dan * q.r;
#ifdef COOPMAT
            // Two buffers: the next step's operand beside this step's.
            uint o = co + b * H3 + j;
            DG_PUT(o, dar);
            DG_PUT(o + H, daz);
            DG_PUT(o + 2u * H, dan * q.r);
#else
            res[i][0] = dar;
            res[i][1] = daz;
            res[i][2] = dan * q.r;
#endif
            dh_next[i] = dh;
            z_next[i] = q.z;
        }
#ifndef COOPMAT
        // One buffer: every read of d_gh[t+1] is done before d_gh[t] replaces it.
        barrier();
        [[unroll]] for (uint i = 0u; i < PER; ++i) {
            uint e = lid + WG * uint(i);
            uint b = e / H, j = e - b * H;
            if (b >= B) continue;
            uint o = co + b * H3 + j;
            DG_PUT(o, res[i][0]);
            DG_PUT(o + H, res[i][1]);
            DG_PUT(o + 2u * H, res[i][2]);
        }
#endif
        // d_gh[t] is complete (and, COOPMAT, every read of part done) before
        // the next step's product.
        barrier();
        prev = cur;
    }
}
