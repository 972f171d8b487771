// A grid-wide barrier for the recurrence kernels (gru_fwd_grid, gru_bwd_grid):
// every workgroup of the dispatch raises a counter in the step-state buffer,
// then waits until all of them have. Only correct when all workgroups of the
// dispatch are resident at once (the engine decides where it uses it), so a
// wait is bounded: past GRID_SPIN_OUTER × GRID_SPIN_INNER polls it sets ST_GRID_FAIL, and every
// wait after that passes at once. The engine zeroes ST_GRID_COUNT before each
// such dispatch (state.comp, op 5) and reports ST_GRID_FAIL as an error.
#ifndef DUALSCOPE_GRID_GLSL
#define DUALSCOPE_GRID_GLSL

#define GRID_SPIN_INNER 50000u
#define GRID_SPIN_OUTER 80u

// The state buffer at binding GRID_STATE_BINDING (defined by the includer),
// coherent and volatile: the counter is polled.
layout(std430, binding = GRID_STATE_BINDING) coherent volatile buffer StateBuf { uint st[]; };

// The k-th barrier of the dispatch (k = 1, 2, ...): waits until every
// workgroup has arrived k times. Call from uniform control flow.
void grid_sync(uint k) {
    // This invocation's global writes are made available before the
    // workgroup's arrival is counted.
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        uint target = k * gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z;
        atomicAdd(st[ST_GRID_COUNT], 1u);
        // Two nested loops of bounded length: lavapipe ends any one loop
        // after 65535 iterations, which would end a single long poll early.
        bool done = false;
        for (uint outer = 0u; outer < GRID_SPIN_OUTER && !done; ++outer) {
            for (uint inner = 0u; inner < GRID_SPIN_INNER; ++inner) {
                if (st[ST_GRID_COUNT] >= target || st[ST_GRID_FAIL] != 0u) {
                    done = true;
                    break;
                }
            }
        }
        if (!done) atomicOr(st[ST_GRID_FAIL], 1u);
    }
    barrier();
    memoryBarrierBuffer();
}

#endif
