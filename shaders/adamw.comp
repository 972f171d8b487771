#version 450
// AdamW (torch.optim.AdamW, single-tensor path) over elements off0 .. off0+n
// of the flat buffers (every parameter tensor in one dispatch), unless the
// guard skipped the step. Decoupled weight decay (2-D weights except the
// embedding) applies inside the runs the decay table lists: dr[0] runs, run
// r covering [dr[1 + 2r], dr[2 + 2r]) of the flat buffers.
// k is the step about to be taken (the finish step increments the counter).
#include "model.glsl"
layout(local_size_x = 256) in;
STATE_BUFFER(0)
layout(std430, binding = 1) buffer P { float p[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) buffer M { float m[]; };
layout(std430, binding = 4) buffer Vs { float v[]; };
layout(std430, binding = 5) readonly buffer Decay { uint dr[]; };

// β^k by repeated squaring: about log2(k) roundings.
float powk(float beta, uint k) {
    float r = 1.0, b = beta;
    while (k > 0u) {
        if ((k & 1u) == 1u) r *= b;
        b *= b;
        k >>= 1;
    }
    return r;
}

void main() {
    if (st[ST_SKIP] != 0u) return;
    uint k = st[ST_STEP] + 1u;
    float lr = ST_F(HP_LR), b1 = ST_F(HP_BETA1), b2 = ST_F(HP_BETA2);
    float step_size = lr / (1.0 - powk(b1, k));
    float bc2_sqrt = sqrt(1.0 - powk(b2, k));
    float decay = 1.0 - lr * ST_F(HP_WD);
    float eps = ST_F(HP_EPS);
    FOR_EACH(i, pc.n) {
        uint j = pc.off0 + i;
        float gj = g[j];
        float pj = p[j];
        bool decays = false;
        // The count is read before the loop (see embed_bwd.comp: GPU-assisted
        // validation and a buffer read in a loop condition).
        uint ranges = dr[0];
        for (uint r = 0u; r < ranges; ++r) decays = decays || (j >= dr[1u + 2u * r] && j < dr[2u + 2u * r]);
        if (decays) pj *= decay;
        float mj = m[j] + (1.0 - b1) * (gj - m[j]);
        float vj = v[j] * b2 + (1.0 - b2) * gj * gj;
        m[j] = mj;
        v[j] = vj;
        p[j] = pj - step_size * (mj / (sqrt(vj) / bc2_sqrt + eps));
    }
}
