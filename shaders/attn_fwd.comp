#version 450
// Multi-head sliding-window attention, forward. One invocation per query
// (t, b, head): scores over the keys J_t = [max(0, t-W+1), t], softmax with the
// maximum subtracted, then c_t for the head's dims. q, k, v, c are [T, B, A];
// attn is [T, B, NH, W], slot w holding key t+1+w-W (0 before the row's start).
// f0 = 1/sqrt(dh).
// Planted bugs (separate variants): FAULT_NO_MAX, the softmax without the
// maximum subtracted (exp overflows on large scores); FAULT_WINDOW_OFF_BY_ONE,
// the window's oldest key dropped (J_t starts at t-W+2), seen once t ≥ W-1.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer Vv { float v[]; };
layout(std430, binding = 3) buffer Attn { float attn[]; };
layout(std430, binding = 4) writeonly buffer C { float c[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pc.T * pc.B * pc.NH) return;
    uint hd = idx % pc.NH;
    uint tb = idx / pc.NH;
    uint t = tb / pc.B;
    uint b = tb - t * pc.B;
    uint dh = pc.A / pc.NH;
    uint qo = tb * pc.A + hd * dh;
#ifdef FAULT_WINDOW_OFF_BY_ONE
    uint lo = t + 2u >= pc.W ? t + 2u - pc.W : 0u;
#else
    uint lo = t + 1u >= pc.W ? t + 1u - pc.W : 0u;
#endif
    uint ao = idx * pc.W;
    uint first = pc.W - 1u - t + lo; // slot of key lo
    for (uint w = 0u; w < first; ++w) attn[ao + w] = 0.0;
    float m = uintBitsToFloat(0xff800000u); // -inf
    for (uint j = lo; j <= t; ++j) {
        uint ko = (j * pc.B + b) * pc.A + hd * dh;
        float s = 0.0;
        for (uint i = 0u; i < dh; ++i) s += q[qo + i] * k[ko + i];
        s *= pc.f0;
        attn[ao + first + (j - lo)] = s;
        m = max(m, s);
    }
#ifdef FAULT_NO_MAX
    m = 0.0;
#endif
    float sum = 0.0;
    for (uint w = first; w < pc.W; ++w) {
        float e = exp(attn[ao + w] - m);
        attn[ao + w] = e;
        sum += e;
    }
    for (uint w = first; w < pc.W; ++w) attn[ao + w] /= sum;
    for (uint i = 0u; i < dh; ++i) {
        float acc = 0.0;
        for (uint j = lo; j <= t; ++j) {
            acc += attn[ao + first + (j - lo)] * v[(j * pc.B + b) * pc.A + hd * dh + i];
        }
        c[qo + i] = acc;
    }
}
