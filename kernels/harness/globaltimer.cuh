// The SM's %globaltimer in ns: the clock the calibration spin and the benchmark gate poll. One
// definition for both, so that they read the same clock the same way.
#pragma once

#include <stdint.h>

static __device__ __forceinline__ uint64_t
global_timer_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
