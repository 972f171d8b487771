#version 450
// Attention backward, per query (t, b, head): dp_j = dc_t · v_j, then
// ds_j = a_j (dp_j - Σ_j a_j dp_j) / sqrt(dh) into ds ([T, B, NH, W], slots as
// attn), and dq_t = Σ_j ds_j k_j. f0 = 1/sqrt(dh).
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer Vv { float v[]; };
layout(std430, binding = 2) readonly buffer Attn { float attn[]; };
layout(std430, binding = 3) readonly buffer Dc { float dc[]; };
layout(std430, binding = 4) buffer Ds { float ds[]; };
layout(std430, binding = 5) writeonly buffer Dq { float dq[]; };

void main() {
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pc.T * pc.B * pc.NH) return;
    uint hd = idx % pc.NH;
    uint tb = idx / pc.NH;
    uint t = tb / pc.B;
    uint b = tb - t * pc.B;
    uint dh = pc.A / pc.NH;
    uint qo = tb * pc.A + hd * dh;
    uint lo = t + 1u >= pc.W ? t + 1u - pc.W : 0u;
    uint ao = idx * pc.W;
    uint first = pc.W - 1u - t + lo;
    for (uint w = 0u; w < first; ++w) ds[ao + w] = 0.0;
    float sum = 0.0;
    for (uint j = lo; j <= t; ++j) {
        uint vo = (j * pc.B + b) * pc.A + hd * dh;
        float dp = 0.0;
        for (uint i = 0u; i < dh; ++i) dp += dc[qo + i] * v[vo + i];
        uint w = ao + first + (j - lo);
        ds[w] = dp;
        sum += attn[w] * dp;
    }
    for (uint w = first; w < pc.W; ++w) {
        float a = attn[ao + w];
        ds[ao + w] = a * (ds[ao + w] - sum) * pc.f0;
    }
    for (uint i = 0u; i < dh; ++i) {
        float acc = 0.0;
        for (uint j = lo; j <= t; ++j) {
            acc += ds[ao + first + (j - lo)] * k[(j * pc.B + b) * pc.A + hd * dh + i];
        }
        dq[qo + i] = acc;
    }
}
