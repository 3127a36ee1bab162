/* Small C helpers for DPDK macros that bindgen cannot express (thread-local rte_errno). */
#include "wrapper.h"

int pint_rte_errno(void) { return rte_errno; }
