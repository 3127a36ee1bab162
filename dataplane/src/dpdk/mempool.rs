//! Packet buffer pools (`rte_pktmbuf_pool_create`).

use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::eal::Eal;
use super::error::{DpdkError, Errno, Result};

/// Bytes reserved in front of packet data in every mbuf (DPDK's RTE_PKTMBUF_HEADROOM).
pub const HEADROOM: u16 = 128;

/// A pool of packet buffers. Freed on drop when every mbuf taken from it is back; a pool
/// dropped while some are still out (an [`super::Mbuf`] kept past it: mbufs do not borrow
/// their pool) is left allocated, and DPDK's memory mapped until the process exits, so that
/// those mbufs stay valid to read and to free. Ports borrow the pool their rings take mbufs
/// from, so they close first.
pub struct Mempool<'eal> {
    raw: NonNull<dpdk_sys::rte_mempool>,
    _eal: PhantomData<&'eal Eal>,
}

// SAFETY: DPDK mempools are multi-producer/multi-consumer safe.
unsafe impl Send for Mempool<'_> {}
// SAFETY: as above; all operations through &Mempool are thread-safe in DPDK.
unsafe impl Sync for Mempool<'_> {}

impl<'eal> Mempool<'eal> {
    /// Creates a pool of `count` mbufs, each with `data_room` bytes after the headroom, with a
    /// per-lcore cache of `cache` mbufs, on NUMA `socket`.
    #[cold]
    pub fn new(
        _eal: &'eal Eal,
        name: &str,
        count: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self> {
        let cname = CString::new(name).map_err(|_| DpdkError::NulInArgument(name.to_owned()))?;
        let room = data_room.saturating_add(HEADROOM);
        // SAFETY: EAL is initialised; the name is a valid C string.
        let p = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(cname.as_ptr(), count, cache, 0, room, socket)
        };
        match NonNull::new(p) {
            Some(raw) => Ok(Mempool {
                raw,
                _eal: PhantomData,
            }),
            None => Err(DpdkError::Mempool {
                name: name.to_owned(),
                count,
                errno: Errno::last(),
            }),
        }
    }

    /// The raw pool pointer for DPDK calls.
    pub fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.raw.as_ptr()
    }

    /// Mbufs currently free in the pool (including per-lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive.
        unsafe { dpdk_sys::rte_mempool_avail_count(self.raw.as_ptr()) }
    }

    /// Mbufs currently taken from the pool.
    pub fn in_use(&self) -> u32 {
        // SAFETY: the pool is alive.
        unsafe { dpdk_sys::rte_mempool_in_use_count(self.raw.as_ptr()) }
    }
}

impl Drop for Mempool<'_> {
    #[cold]
    fn drop(&mut self) {
        if self.in_use() != 0 {
            // Mbufs of this pool are still out: freeing it would leave them pointing into
            // freed memory, and their drop would put them back into it.
            super::eal::keep_memory();
            return;
        }
        // SAFETY: the pool is alive, and no mbuf of it is out (none can be taken: that
        // needs a borrow of the pool, or a port, which borrows it too).
        unsafe { dpdk_sys::rte_mempool_free(self.raw.as_ptr()) };
    }
}
