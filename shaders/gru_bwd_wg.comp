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
// gru_bwd_wg_cm: the product on cooperative matrices. Subgroup sg (of 16) owns the
// unit tile ct = sg % 8 (units 16·ct .. 16·ct + 15) and the K-tiles (rows of
// W_hh) ks + 2i, ks = sg / 8: 12 f16 fragments at H = 128 (48 registers a
// lane). Its 16×16 partial sum goes to shared memory; invocation
// (row, unit) adds the two halves.
// FMA_PRODUCTS (gru_bwd_wg_fma; lavapipe, tests): the same step with the product as f32
// FMAs over the same f16-rounded operands (W_hh read from the parameters
// each step), each invocation summing its own unit over all 3H rows.
//
// No arrays of registers: every fragment and every pair's state is its own
// variable, named in the code, so the driver keeps them in registers. As
// arrays, indexed in loops it did not unroll, they lived in local memory
// (320 B an invocation, exactly the fragments and the pairs'
// prefetched inputs).
//
// Shared memory: on cooperative matrices 24.5 KB (d_gh[t+1] and d_gh[t], f16, 16 × 3H each;
// the second also stages W_hh on its way into registers) + 16.5 KB (the two
// halves' partial sums, 16 × H each); FMA: 24.5 KB (d_gh[t+1] rounded to f16,
// as f32, 16 × 3H).
// The dispatch walks t = pc.t down to pc.t + 1 - pc.n.
// pc.flag: 0 in a step; the lab's timing probe (Engine::probe_wg) switches
// parts off, results meaningless (include/probe_bits.glsl): no product, no
// stores to memory, no loads of the steps' inputs, no barriers in the steps
// (PROBE_WG_NO_PRODUCT, _NO_STORES, _NO_INPUTS, _NO_BARRIERS).
//   p: W_hh [3H, H] at off0; gh [T,B,3H]; gates [3][T,B,H]; h [T,B,H];
//   d_h [T,B,H] (from above); dh_tot [T,B,H]; d_gi, d_gh [T,B,3H].
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

#define WG 512u
#define HMAX 128u
#define NCMAX 384u
// Shared rows padded by 16 bytes: the product's 16-row tiles read d_gh
// (f16, row DS) and write part (f32, row PS); unpadded, their rows of 768
// and 512 bytes all start in the same bank. DBUF: one d_gh buffer.
#define DS (3u * pc.H + 8u)
#define PS (pc.H + 4u)
#define DBUF (16u * (NCMAX + 8u))
// K-tiles a subgroup holds at most 3·HMAX/16 over 2 = 12 (wb0..wb11);
// (row, unit) pairs an invocation owns at most ceil(16 · HMAX / WG) = 4.
layout(local_size_x = 512) in;
layout(std430, binding = 0) readonly buffer Par { float p[]; };
layout(std430, binding = 1) readonly buffer Gh { float gh[]; };
layout(std430, binding = 2) readonly buffer Gates { float gates[]; };
layout(std430, binding = 3) readonly buffer Hs { float h[]; };
layout(std430, binding = 4) readonly buffer Dh { float d_h[]; };
layout(std430, binding = 5) buffer DhTot { float dh_tot[]; };
layout(std430, binding = 6) writeonly buffer Dgi { float d_gi[]; };
layout(std430, binding = 7) buffer Dgh { float d_gh[]; };

#ifndef FMA_PRODUCTS
// d_gh of the 16 rows in f16, [buffer][row][m] (rows past B zero).
shared float16_t dg[2u * DBUF];
// The two halves' partial sums, [half][row][unit].
shared float part[2u * 16u * (HMAX + 4u)];
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FRAG_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define DG_PUT(i, v) dg[i] = float16_t(v)
#define DG_BUFS 2u
#else
// d_gh[t+1] of the rows rounded to f16, as f32, [row][m].
shared float dg[DBUF];
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

// Pair e = lid + WG·i of this invocation at the chunk's start: dh_{t+1} and
// z_{t+1} from memory (zero at the sequence's end or past B) and its inputs
// of step pc.t.
void pair_init(uint e, bool first_above, out float dh_next, out float z_next, out StepIn qn) {
    uint H = pc.H, B = pc.B;
    uint rh = pc.T * B * H;
    uint b = e / H, j = e - b * H;
    dh_next = 0.0;
    z_next = 0.0;
    if (b < B && first_above) {
        uint x = ((pc.t + 1u) * B + b) * H + j;
        dh_next = dh_tot[x];
        z_next = gates[rh + x];
    }
    if (b < B && pc.n > 0u) qn = fetch(pc.t, b, j);
}

// Step t (the chunk's s-th) of pair e: dh_t from above, the carry and the
// product (in part on cooperative matrices, or summed here, FMA), then the gate gradients.
// On cooperative matrices d_gh[t] goes into the other shared buffer at once; FMA returns it
// in res, written after a barrier (one buffer).
void pair_step(uint e, uint s, uint t, bool above, uint po, uint co,
               inout StepIn qn, inout float dh_next, inout float z_next, out vec3 res) {
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint b = e / H, j = e - b * H;
    res = vec3(0.0);
    if (b >= B) return;
    StepIn q = qn;
    if (s + 1u < pc.n && (pc.flag & PROBE_WG_NO_INPUTS) == 0u) qn = fetch(t - 1u, b, j);
    uint row = t * B + b;
    uint x = row * H + j;
    float carry = 0.0;
    if (above && (pc.flag & PROBE_WG_NO_PRODUCT) == 0u) {
        float sum = 0.0;
#ifndef FMA_PRODUCTS
        sum = part[b * PS + j] + part[16u * PS + b * PS + j];
#else
        uint drow = po + b * DS;
        for (uint m = 0u; m < H3; ++m) sum += dg[drow + m] * round_f16(p[pc.off0 + m * H + j]);
#endif
        carry = dh_next * z_next + sum;
    }
    float dh = q.dh + carry;
    bool store = (pc.flag & PROBE_WG_NO_STORES) == 0u;
    if (store) dh_tot[x] = dh;
    float dn = dh * (1.0 - q.z);
    float dz = dh * (q.hp - q.n);
    float dan = dn * (1.0 - q.n * q.n);
    float dar = dan * q.ghn * q.r * (1.0 - q.r);
    float daz = dz * q.z * (1.0 - q.z);
    uint g = row * H3;
    if (store) {
        d_gi[g + j] = dar;
        d_gi[g + H + j] = daz;
        d_gi[g + 2u * H + j] = dan;
        d_gh[g + j] = dar;
        d_gh[g + H + j] = daz;
        d_gh[g + 2u * H + j] = dan * q.r;
    }
    res = vec3(dar, daz, dan * q.r);
#ifndef FMA_PRODUCTS
    // Two buffers: the next step's operand beside this step's.
    uint o = co + b * DS + j;
    DG_PUT(o, dar);
    DG_PUT(o + H, daz);
    DG_PUT(o + 2u * H, dan * q.r);
#endif
    dh_next = dh;
    z_next = q.z;
}

#ifdef FMA_PRODUCTS
// FMA: pair e's d_gh[t] into the one shared buffer, after every read of d_gh[t+1].
void pair_put(uint e, uint co, vec3 res) {
    uint H = pc.H, H3 = 3u * H;
    uint b = e / H, j = e - b * H;
    if (b >= pc.B) return;
    uint o = co + b * DS + j;
    DG_PUT(o, res.x);
    DG_PUT(o + H, res.y);
    DG_PUT(o + 2u * H, res.z);
}
#endif

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint H = pc.H, H3 = 3u * H, B = pc.B;
    uint ktiles = H3 / 16u;

#ifndef FMA_PRODUCTS
    uint sg = gl_SubgroupID;
    uint ct = sg % 8u, ks = sg / 8u;
    bool mult = ct < H / 16u;
    FRAG_B wb0 = FRAG_B(0.0); FRAG_B wb1 = FRAG_B(0.0); FRAG_B wb2 = FRAG_B(0.0); FRAG_B wb3 = FRAG_B(0.0);
    FRAG_B wb4 = FRAG_B(0.0); FRAG_B wb5 = FRAG_B(0.0); FRAG_B wb6 = FRAG_B(0.0); FRAG_B wb7 = FRAG_B(0.0);
    FRAG_B wb8 = FRAG_B(0.0); FRAG_B wb9 = FRAG_B(0.0); FRAG_B wb10 = FRAG_B(0.0); FRAG_B wb11 = FRAG_B(0.0);
// K-tiles 2I and 2I + 1 of W_hh (rows 16kt .. 16kt + 15, all units) staged in
// the second d_gh buffer, [row in tile][unit]; this subgroup's fragment of
// the one of its half (kt = ks + 2I) into W.
#define LOAD_I(W, I) \
    for (uint half_ = 0u; half_ < 2u; ++half_) { \
        uint kt = half_ + 2u * I; \
        if (kt < ktiles) { \
            for (uint e = lid; e < 16u * H; e += WG) \
                dg[DBUF + e] = float16_t(p[pc.off0 + 16u * kt * H + e]); \
            barrier(); \
            if (mult && ks == half_) \
                coopMatLoad(W, dg, DBUF + ct * 16u, H, gl_CooperativeMatrixLayoutRowMajor); \
            barrier(); \
        } \
    }
    LOAD_I(wb0, 0u) LOAD_I(wb1, 1u) LOAD_I(wb2, 2u) LOAD_I(wb3, 3u)
    LOAD_I(wb4, 4u) LOAD_I(wb5, 5u) LOAD_I(wb6, 6u) LOAD_I(wb7, 7u)
    LOAD_I(wb8, 8u) LOAD_I(wb9, 9u) LOAD_I(wb10, 10u) LOAD_I(wb11, 11u)
#endif

    // d_gh[t+1] (the chunk's first step's operand), from memory.
    bool first_above = pc.t + 1u < pc.T;
    for (uint e = lid; e < 16u * H3; e += WG) {
        uint b = e / H3, m = e - b * H3;
        float v = 0.0;
        if (b < B && first_above) v = d_gh[((pc.t + 1u) * B + b) * H3 + m];
        DG_PUT(b * DS + m, v);
#ifndef FMA_PRODUCTS
        DG_PUT(DBUF + b * DS + m, 0.0);
#endif
    }
    // The step's inputs are loaded one step ahead, so that their latency
    // overlaps the previous step's barrier and product; z_{t+1} is the
    // previous step's z (at the chunk's start, from memory). PER = 4 pairs
    // (row, unit) an invocation: e = lid + WG·i.
    uint e0 = lid, e1 = lid + WG, e2 = lid + 2u * WG, e3 = lid + 3u * WG;
    float dn0, dn1, dn2, dn3, zn0, zn1, zn2, zn3;
    StepIn q0, q1, q2, q3;
    pair_init(e0, first_above, dn0, zn0, q0);
    pair_init(e1, first_above, dn1, zn1, q1);
    pair_init(e2, first_above, dn2, zn2, q2);
    pair_init(e3, first_above, dn3, zn3, q3);
    barrier();

    uint prev = 0u;
    for (uint s = 0u; s < pc.n; ++s) {
        uint t = pc.t - s;
        bool above = t + 1u < pc.T;
        uint cur = (prev + 1u) % DG_BUFS;
        uint po = prev * DBUF, co = cur * DBUF;
        bool sync = (pc.flag & PROBE_WG_NO_BARRIERS) == 0u;
#ifndef FMA_PRODUCTS
        if (above && (pc.flag & PROBE_WG_NO_PRODUCT) == 0u) {
            if (mult) {
                // Two accumulators, so that the products do not wait on each other.
                FRAG_C acc0 = FRAG_C(0.0); FRAG_C acc1 = FRAG_C(0.0);
                FRAG_A ga;
// d_gh[t+1]'s K-tile ks + 2I times this subgroup's fragment W, into ACC.
#define MUL_I(W, I, ACC) \
                if (ks + 2u * I < ktiles) { \
                    coopMatLoad(ga, dg, po + (ks + 2u * I) * 16u, DS, gl_CooperativeMatrixLayoutRowMajor); \
                    ACC = coopMatMulAdd(ga, W, ACC); \
                }
                MUL_I(wb0, 0u, acc0) MUL_I(wb1, 1u, acc1) MUL_I(wb2, 2u, acc0) MUL_I(wb3, 3u, acc1)
                MUL_I(wb4, 4u, acc0) MUL_I(wb5, 5u, acc1) MUL_I(wb6, 6u, acc0) MUL_I(wb7, 7u, acc1)
                MUL_I(wb8, 8u, acc0) MUL_I(wb9, 9u, acc1) MUL_I(wb10, 10u, acc0) MUL_I(wb11, 11u, acc1)
                acc0 = acc0 + acc1;
                coopMatStore(acc0, part, ks * 16u * PS + ct * 16u, PS, gl_CooperativeMatrixLayoutRowMajor);
            }
            if (sync) barrier();
        }
#endif
        vec3 r0, r1, r2, r3;
        pair_step(e0, s, t, above, po, co, q0, dn0, zn0, r0);
        pair_step(e1, s, t, above, po, co, q1, dn1, zn1, r1);
        pair_step(e2, s, t, above, po, co, q2, dn2, zn2, r2);
        pair_step(e3, s, t, above, po, co, q3, dn3, zn3, r3);
#ifdef FMA_PRODUCTS
        // One buffer: every read of d_gh[t+1] is done before d_gh[t] replaces it.
        if (sync) barrier();
        pair_put(e0, co, r0);
        pair_put(e1, co, r1);
        pair_put(e2, co, r2);
        pair_put(e3, co, r3);
#endif
        // d_gh[t] is complete (and, on cooperative matrices, every read of part done) before
        // the next step's product.
        if (sync) barrier();
        prev = cur;
    }
}
