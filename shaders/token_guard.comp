#version 450
// The per-token guard of docs/model.md, per position t:
//   norm = ‖g_t‖ · ‖c_t‖ with g_t = dlogits_t / S (unscaled), always written;
// with flag = 1 and cap τ = f0, the row of dlogits feeding the W_ctx gradient is
// scaled by τ/norm where norm > τ (into dl_ctx), and the capped positions are
// counted in the state. dlogits [R, V], c [R, A].
//
// A workgroup takes 4 positions at a time, 64 invocations each: invocation x
// sums the squares of elements x, x+64, … of its rows (consecutive
// invocations read consecutive floats), then a fixed tree adds the 64 partial
// sums, so the result does not depend on scheduling. Workgroups walk the
// positions grid-stride.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Dl { float dl[]; };
layout(std430, binding = 1) readonly buffer C { float c[]; };
layout(std430, binding = 2) writeonly buffer Tn { float token_norm[]; };
layout(std430, binding = 3) writeonly buffer DlCtx { float dl_ctx[]; };
STATE_BUFFER(4)

shared float red_g[256];
shared float red_c[256];

void main() {
    uint l = gl_LocalInvocationIndex;
    uint x = l % 64u;
    uint rows = pc.T * pc.B;
    float inv_scale = 1.0 / ST_F(ST_STEP_SCALE);
    for (uint r0 = gl_WorkGroupID.x * 4u; r0 < rows; r0 += gl_NumWorkGroups.x * 4u) {
        uint row = r0 + l / 64u;
        bool ok = row < rows;
        float gg = 0.0, cc = 0.0;
        if (ok) {
            for (uint i = x; i < pc.V; i += 64u) gg += dl[row * pc.V + i] * dl[row * pc.V + i];
            for (uint i = x; i < pc.A; i += 64u) cc += c[row * pc.A + i] * c[row * pc.A + i];
        }
        red_g[l] = gg;
        red_c[l] = cc;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (x < s) {
                red_g[l] += red_g[l + s];
                red_c[l] += red_c[l + s];
            }
            barrier();
        }
        float norm = sqrt(red_g[l - x]) * inv_scale * sqrt(red_c[l - x]);
        // Every invocation has read its row's sums before the next round
        // overwrites them.
        barrier();
        if (ok && x == 0u) token_norm[row] = norm;
        if (ok && pc.flag == 1u) {
            float f = 1.0;
            if (norm > pc.f0) {
                f = pc.f0 / norm;
                if (x == 0u) atomicAdd(st[ST_CAPPED], 1u);
            }
            for (uint i = x; i < pc.V; i += 64u) dl_ctx[row * pc.V + i] = dl[row * pc.V + i] * f;
        }
    }
}
