// Shared by the model's kernels (everything but the GEMMs): one push-constant
// block of 16 words (src/vk/engine/kernels.rs mirrors it as `ModelPush`), the
// layout of the step-state buffer, and small helpers.
#ifndef DUALSCOPE_MODEL_GLSL
#define DUALSCOPE_MODEL_GLSL

#include "common.glsl"

layout(push_constant) uniform Push {
    uint T;    // positions per row
    uint B;    // rows
    uint D;    // a width: d_embed, or the columns of the operand
    uint H;    // hidden width
    uint A;    // attention width
    uint NH;   // heads
    uint W;    // attention window
    uint V;    // vocabulary
    uint t;    // current timestep (recurrence kernels)
    uint n;    // element count of element-wise kernels
    uint off0; // element offsets into the kernel's buffers
    uint off1;
    uint off2;
    uint flag; // kernel-specific switch
    float f0;  // kernel-specific scalars
    float f1;
} pc;

// The step-state buffer: words read and written by the device only, so that
// a whole training step runs without the host. Floats are stored as bits.
#define ST_SCALE 0u         // loss scale S for the next backward (f32)
#define ST_GROWTH 1u        // good steps in a row (GradScaler's growth tracker)
#define ST_STEP 2u          // AdamW step counter k
#define ST_SKIP 3u          // 0 taken, 1 non-finite norm, 2 zero norm, 3 non-finite post-clip, 4 zero post-clip
#define ST_NORM 4u          // unscaled gradient norm (f32)
#define ST_POST_CLIP 5u     // norm after clipping (f32)
#define ST_CLIPPED 6u       // 1 when clipped
#define ST_LOSS 7u          // masked mean loss (f32)
#define ST_CAPPED 8u        // positions the per-token guard capped
#define ST_STEP_SCALE 9u    // the scale this step's gradients carried (f32)
#define ST_CLIP_FACTOR 10u  // clip / (norm + 1e-6), or 1 (f32)
#define ST_SKIPPED_TOTAL 11u
#define ST_SUMSQ 12u        // scratch: the last sum of squares (f32)
#define ST_GRID_FAIL 13u    // 1: a grid-wide barrier gave up waiting (include/grid.glsl)
#define ST_N_TARGETS 14u    // N, the batch's target positions (the loss kernel copies it)
// Hyper-parameters, written by the host.
#define HP_LR 16u
#define HP_BETA1 17u
#define HP_BETA2 18u
#define HP_EPS 19u
#define HP_WD 20u
#define HP_CLIP 21u
#define HP_DYNAMIC 22u      // 1: dynamic loss scale
#define HP_GROWTH_INTERVAL 23u
#define HP_GROWTH_FACTOR 24u
#define HP_BACKOFF 25u
#define STATE_WORDS 32u

#define STATE_BUFFER(b) layout(std430, binding = b) buffer StateBuf { uint st[]; };
#define ST_F(i) uintBitsToFloat(st[i])
#define ST_SETF(i, x) st[i] = floatBitsToUint(x)

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

bool finite(float x) { return !isnan(x) && !isinf(x); }

// tanh that cannot overflow: |x| > 15 gives ±1 in f32 anyway; NaN passes through.
float tanh_safe(float x) { return isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); }

// A grid-stride loop over `n` elements for a kernel of 256 invocations per group.
#define FOR_EACH(i, n) for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * 256u)

// A quiet NaN, for values that have no meaning (an out-of-range token).
#define QNAN uintBitsToFloat(0x7fc00000u)

#endif
