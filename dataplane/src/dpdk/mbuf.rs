//! An owned packet buffer that frees itself on drop.

use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

use super::mempool::Mempool;

/// One packet buffer (`rte_mbuf`) owned by Rust: freed back to its pool on drop. The pool
/// must outlive it. Its data is its own: no other mbuf shows the same bytes while it is held
/// (this layer makes no clones or attached copies), so [`Mbuf::data_mut`] may write them.
#[repr(transparent)]
pub struct Mbuf {
    raw: NonNull<rte_mbuf>,
}

// SAFETY: an mbuf is exclusively owned; moving it to another thread is how DPDK apps work.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Takes one mbuf from `pool`, or None when the pool is empty.
    pub fn alloc(pool: &Mempool<'_>) -> Option<Mbuf> {
        // SAFETY: the pool is alive.
        NonNull::new(unsafe { dpdk_sys::rte_pktmbuf_alloc(pool.as_ptr()) }).map(|raw| Mbuf { raw })
    }

    /// Wraps a raw mbuf pointer, taking ownership.
    ///
    /// # Safety
    /// `raw` must be a valid mbuf that nothing else owns or frees, whose data no other mbuf
    /// in use shows (not a clone made by `rte_pktmbuf_clone` or attached to another's data
    /// while that one is used): [`Mbuf::data_mut`] writes it. What drivers return from rx
    /// is such an mbuf, including one attached to a stride of a multi-packet receive
    /// buffer, whose stride no other packet shares.
    #[inline(always)]
    pub unsafe fn from_raw(raw: NonNull<rte_mbuf>) -> Mbuf {
        Mbuf { raw }
    }

    /// Gives up ownership without freeing.
    #[inline(always)]
    pub fn into_raw(self) -> NonNull<rte_mbuf> {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// The raw pointer, still owned by this `Mbuf`.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut rte_mbuf {
        self.raw.as_ptr()
    }

    #[inline(always)]
    fn m(&self) -> &rte_mbuf {
        // SAFETY: we own a valid mbuf.
        unsafe { self.raw.as_ref() }
    }

    /// Length of the whole packet (all segments).
    #[inline(always)]
    pub fn pkt_len(&self) -> usize {
        self.m().pkt_len as usize
    }

    /// Length of the data in the first segment.
    #[inline(always)]
    pub fn data_len(&self) -> usize {
        usize::from(self.m().data_len)
    }

    /// Number of segments.
    #[inline(always)]
    pub fn segments(&self) -> u16 {
        self.m().nb_segs
    }

    /// Input port as set by the receiving driver.
    #[inline(always)]
    pub fn port(&self) -> u16 {
        self.m().port
    }

    /// The first segment's data.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        let m = self.m();
        // SAFETY: buf_addr + data_off points at data_len initialised bytes inside the buffer.
        unsafe {
            core::slice::from_raw_parts(
                (m.buf_addr as *const u8).add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// The first segment's data, writable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; we own the mbuf exclusively and no other mbuf shows its data
        // (the contract of `from_raw`, the only way in besides `alloc`).
        unsafe {
            let m = self.raw.as_mut();
            core::slice::from_raw_parts_mut(
                (m.buf_addr as *mut u8).add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// The first segment's whole writable room, from the data's start to the buffer's end
    /// (the data and the tailroom): a frame built in place may be written in whole chunks
    /// past its length, then sized with [`Mbuf::set_len`].
    #[inline(always)]
    pub fn room_mut(&mut self) -> &mut [u8] {
        // SAFETY: buf_addr + data_off .. buf_addr + buf_len lies inside the mbuf's buffer,
        // which we own exclusively; mbuf buffers are initialised memory from the pool.
        unsafe {
            let m = self.raw.as_mut();
            core::slice::from_raw_parts_mut(
                (m.buf_addr as *mut u8).add(usize::from(m.data_off)),
                usize::from(m.buf_len) - usize::from(m.data_off),
            )
        }
    }

    /// Free room in front of the data in the first segment.
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        usize::from(self.m().data_off)
    }

    /// Grows the packet by `n` bytes at the front (as `rte_pktmbuf_prepend`); returns the
    /// new front bytes, or None, changing nothing, when the headroom is smaller.
    #[inline(always)]
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.headroom() {
            return None;
        }
        // SAFETY: we own the mbuf; n <= data_off, so the new start stays inside the buffer,
        // and the lengths grow by n <= data_off <= u16::MAX.
        unsafe {
            let m = self.raw.as_mut();
            m.data_off -= n as u16;
            m.data_len += n as u16;
            m.pkt_len += n as u32;
        }
        Some(&mut self.data_mut()[..n])
    }

    /// Removes `n` bytes from the front of the first segment (as `rte_pktmbuf_adj`); false,
    /// changing nothing, when the segment is shorter.
    #[inline(always)]
    pub fn adj(&mut self, n: usize) -> bool {
        if n > self.data_len() {
            return false;
        }
        // SAFETY: we own the mbuf; n <= data_len, so the start stays inside the data.
        unsafe {
            let m = self.raw.as_mut();
            m.data_off += n as u16;
            m.data_len -= n as u16;
            m.pkt_len -= n as u32;
        }
        true
    }

    /// Starts loading the first cache line of the packet data (the pipeline, with
    /// `dataplane.prefetch`, prefetches ahead so the headers are in cache when it reads them).
    #[inline(always)]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, and the address lies inside the mbuf's buffer.
        unsafe {
            let m = self.m();
            let p = (m.buf_addr as *const i8).add(usize::from(m.data_off));
            core::arch::x86_64::_mm_prefetch(p, core::arch::x86_64::_MM_HINT_T0);
        }
    }

    /// Free room after the data in the first segment.
    pub fn tailroom(&self) -> usize {
        let m = self.m();
        usize::from(m.buf_len) - usize::from(m.data_off) - usize::from(m.data_len)
    }

    /// Sets the length of a single-segment packet (for packets built in place). Returns
    /// false, changing nothing, if `len` does not fit in the buffer.
    #[inline(always)]
    pub fn set_len(&mut self, len: usize) -> bool {
        // SAFETY: we own the mbuf.
        let m = unsafe { self.raw.as_mut() };
        if m.nb_segs != 1 || len > usize::from(m.buf_len) - usize::from(m.data_off) {
            return false;
        }
        m.data_len = len as u16;
        m.pkt_len = len as u32;
        true
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf; freeing returns all its segments to their pools.
        unsafe { dpdk_sys::rte_pktmbuf_free(self.raw.as_ptr()) };
    }
}

impl pipeline::PacketBuf for Mbuf {
    #[inline(always)]
    fn data(&self) -> &[u8] {
        Mbuf::data(self)
    }

    #[inline(always)]
    fn data_mut(&mut self) -> &mut [u8] {
        Mbuf::data_mut(self)
    }

    #[inline(always)]
    fn pkt_len(&self) -> usize {
        Mbuf::pkt_len(self)
    }

    #[inline(always)]
    fn headroom(&self) -> usize {
        Mbuf::headroom(self)
    }

    #[inline(always)]
    fn prepend(&mut self, n: usize) -> bool {
        Mbuf::prepend(self, n).is_some()
    }

    #[inline(always)]
    fn adj(&mut self, n: usize) -> bool {
        Mbuf::adj(self, n)
    }

    #[inline(always)]
    fn prefetch(&self) {
        Mbuf::prefetch(self)
    }
}
