// A grid-wide barrier for the recurrence kernels (gru_fwd_grid, gru_bwd_grid).
// Each workgroup owns one flag (its own 128-byte line of the sync buffer, at
// binding GRID_SYNC_BINDING), which the engine zeroes before the dispatch. At
// the k-th barrier a workgroup writes k into its flag, then its invocations
// poll the flags of all workgroups (one each) until every flag reaches k. No
// atomics: nothing serialises on one address. The kernels tiled by row
// blocks may wait for the workgroups of their own row block only
// (grid_sync_rows), since no row reads another's values.
//
// Only correct when all workgroups of the dispatch are resident at once (the
// engine decides where it uses it), so a wait is bounded: past
// GRID_SPIN_OUTER × GRID_SPIN_INNER polls it sets ST_GRID_FAIL in the state
// buffer (binding GRID_STATE_BINDING), after which every wait passes at once;
// the engine reports that as an error. Both bindings are defined by the includer.
//
// Where the device has lavapipe's loop guard (65535 loop passes in total per
// invocation, after which every loop ends early), the engine passes a budget
// of polls for the whole dispatch in pc.f1 (0: none) and cuts the steps into
// dispatches short enough that the arithmetic stays within the rest: a wait
// past the budget gives up as above, so the guard never ends a loop early
// unnoticed (docs/shader-loops.md).
#ifndef DUALSCOPE_GRID_GLSL
#define DUALSCOPE_GRID_GLSL

#define GRID_SPIN_INNER 50000u
#define GRID_SPIN_OUTER 80u
// Words between two flags (one 128-byte line each).
#define GRID_FLAG_STRIDE 32u

// `volatile` alone: glslang decorates a volatile block Coherent as well, and
// `coherent volatile` gives the decoration twice, which SPIR-V validation
// rejects (VUID-VkShaderModuleCreateInfo-pCode-08737).
layout(std430, binding = GRID_STATE_BINDING) volatile buffer StateBuf { uint st[]; };
layout(std430, binding = GRID_SYNC_BINDING) volatile buffer SyncBuf { uint flags[]; };

// Polls this invocation made in the dispatch (for the budget in pc.f1).
uint grid_polls = 0u;

// The k-th barrier of the dispatch as seen by this workgroup: it announces
// its arrival, then invocation i < `count` polls the flag of workgroup
// `idx` until it reaches k. Call from uniform control flow.
void grid_wait(uint k, uint count, uint idx) {
    // Every invocation's global writes are made available before the
    // workgroup's arrival is announced.
    memoryBarrierBuffer();
    barrier();
    uint lid = gl_LocalInvocationIndex;
    if (lid == 0u) flags[gl_WorkGroupID.x * GRID_FLAG_STRIDE] = k;
    if (lid < count) {
        // Two nested loops of bounded length, and the poll budget.
        uint budget = uint(pc.f1);
        bool done = false, spent = false;
        for (uint outer = 0u; outer < GRID_SPIN_OUTER && !done && !spent; ++outer) {
            if (st[ST_GRID_FAIL] != 0u) {
                done = true;
                break;
            }
            for (uint inner = 0u; inner < GRID_SPIN_INNER; ++inner) {
                if (flags[idx * GRID_FLAG_STRIDE] >= k) {
                    done = true;
                    break;
                }
                grid_polls += 1u;
                if (budget != 0u && grid_polls >= budget) {
                    spent = true;
                    break;
                }
            }
        }
        if (!done) atomicOr(st[ST_GRID_FAIL], 1u);
    }
    barrier();
    memoryBarrierBuffer();
}

// The k-th barrier of the dispatch, over every workgroup (at most as many
// as the workgroup has invocations).
void grid_sync(uint k) {
    grid_wait(k, gl_NumWorkGroups.x, gl_LocalInvocationIndex);
}

// The k-th barrier over one row block only, for the kernels tiled by row
// blocks of 16 (workgroup layer·groups + rb + rb_count·c owns row block rb
// and unit block c < per of its layer): waits for the workgroups of
// `layers` layers from layer `first` on, in row block rb. Rows of different
// blocks never meet in a GRU, so each block walks its steps as fast as its
// own workgroups allow; and flags only grow, so a workgroup that has run
// ahead is still waited for right. (The index is computed at each barrier:
// computed once before the steps and kept, the H200's steps were slower.)
void grid_sync_rows(uint k, uint first, uint layers, uint rb, uint rb_count, uint per, uint groups) {
    uint i = gl_LocalInvocationIndex;
    grid_wait(k, layers * per, (first + i / per) * groups + rb + rb_count * (i % per));
}

#endif
