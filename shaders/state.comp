#version 450
// The step's decisions, made on the device (one workgroup of 256):
//   flag 0 begin:  the scale this step carries; counters cleared
//   flag 1 loss:   loss = Σ data[0..n] / N (N from the state, where loss.comp
//                  put it), summed in a fixed order
//   flag 2 norm:   norm = sqrt(Σ partials); guard (non-finite or zero, or a
//                  failed grid barrier: skip);
//                  clip factor clip / (norm + 1e-6) where norm > clip
//   flag 3 post:   after clipping, the post-clip norm and its guard
//   flag 4 finish: the step counter, the skip count and the loss scale
//                  (GradScaler: back off on a skip, grow after an interval)
#include "model.glsl"
layout(local_size_x = 256) in;
STATE_BUFFER(0)
layout(std430, binding = 1) readonly buffer Data { float data[]; };

shared float red[256];

float total() {
    uint lid = gl_LocalInvocationID.x;
    float acc = 0.0;
    for (uint i = lid; i < pc.n; i += 256u) acc += data[i];
    red[lid] = acc;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    return red[0];
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    if (pc.flag == 1u || pc.flag == 2u || pc.flag == 3u) {
        float s = total();
        if (lid != 0u) return;
        if (pc.flag == 1u) {
            ST_SETF(ST_LOSS, s / float(st[ST_N_TARGETS]));
        } else if (pc.flag == 2u) {
            float norm = sqrt(s);
            ST_SETF(ST_NORM, norm);
            ST_SETF(ST_POST_CLIP, norm);
            if (st[ST_GRID_FAIL] != 0u) {
                // A grid barrier gave up: the gradients are meaningless, and
                // the weights must not see them (the engine reports an error).
                st[ST_SKIP] = 5u;
            } else if (!finite(norm)) {
                st[ST_SKIP] = 1u;
            } else if (norm == 0.0) {
                st[ST_SKIP] = 2u;
            } else if (norm > ST_F(HP_CLIP)) {
                st[ST_CLIPPED] = 1u;
                ST_SETF(ST_CLIP_FACTOR, ST_F(HP_CLIP) / (norm + 1e-6));
            }
        } else if (st[ST_SKIP] == 0u && st[ST_CLIPPED] == 1u) {
            float post = sqrt(s);
            ST_SETF(ST_POST_CLIP, post);
            if (!finite(post)) {
                st[ST_SKIP] = 3u;
            } else if (post == 0.0) {
                st[ST_SKIP] = 4u;
            }
        }
        return;
    }
    if (lid != 0u) return;
    if (pc.flag == 0u) {
        ST_SETF(ST_STEP_SCALE, ST_F(ST_SCALE));
        st[ST_CAPPED] = 0u;
        st[ST_SKIP] = 0u;
        st[ST_CLIPPED] = 0u;
        st[ST_GRID_FAIL] = 0u;
        ST_SETF(ST_CLIP_FACTOR, 1.0);
    } else if (pc.flag == 4u) {
        bool skipped = st[ST_SKIP] != 0u;
        if (skipped) {
            st[ST_SKIPPED_TOTAL] += 1u;
        } else {
            st[ST_STEP] += 1u;
        }
        if (st[HP_DYNAMIC] == 1u) {
            if (skipped) {
                ST_SETF(ST_SCALE, ST_F(ST_SCALE) * ST_F(HP_BACKOFF));
                st[ST_GROWTH] = 0u;
            } else {
                st[ST_GROWTH] += 1u;
                if (st[ST_GROWTH] == st[HP_GROWTH_INTERVAL]) {
                    ST_SETF(ST_SCALE, ST_F(ST_SCALE) * ST_F(HP_GROWTH_FACTOR));
                    st[ST_GROWTH] = 0u;
                }
            }
        }
    }
}
