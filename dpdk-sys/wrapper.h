/* The DPDK headers the project binds. Kept small: only what the safe layer uses. */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_dev.h>
#include <rte_version.h>
#include <rte_lpm.h>
#include <rte_thread.h>
