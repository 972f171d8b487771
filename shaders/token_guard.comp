#version 450
// The per-token guard of MODEL.md, one invocation per position:
//   norm = ‖g_t‖ · ‖c_t‖ with g_t = dlogits_t / S (unscaled), always written;
// with flag = 1 and cap τ = f0, the row of dlogits feeding the W_ctx gradient is
// scaled by τ/norm where norm > τ (into dl_ctx), and the capped positions are
// counted in the state. dlogits [R, V], c [R, A].
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Dl { float dl[]; };
layout(std430, binding = 1) readonly buffer C { float c[]; };
layout(std430, binding = 2) writeonly buffer Tn { float token_norm[]; };
layout(std430, binding = 3) writeonly buffer DlCtx { float dl_ctx[]; };
STATE_BUFFER(4)

void main() {
    uint row = gl_GlobalInvocationID.x;
    if (row >= pc.T * pc.B) return;
    float gg = 0.0, cc = 0.0;
    for (uint i = 0u; i < pc.V; ++i) gg += dl[row * pc.V + i] * dl[row * pc.V + i];
    for (uint i = 0u; i < pc.A; ++i) cc += c[row * pc.A + i] * c[row * pc.A + i];
    float norm = sqrt(gg) * (1.0 / ST_F(ST_STEP_SCALE)) * sqrt(cc);
    token_norm[row] = norm;
    if (pc.flag == 1u) {
        float f = 1.0;
        if (norm > pc.f0) {
            f = pc.f0 / norm;
            atomicAdd(st[ST_CAPPED], 1u);
        }
        for (uint i = 0u; i < pc.V; ++i) dl_ctx[row * pc.V + i] = dl[row * pc.V + i] * f;
    }
}
