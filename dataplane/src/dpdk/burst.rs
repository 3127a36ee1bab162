//! A fixed-size burst of owned mbufs that lives on the stack (no allocation per burst).

use std::ptr::NonNull;

use dpdk_sys::rte_mbuf;

use super::mbuf::Mbuf;

/// The burst size the poll loop uses (as in DPDK's examples).
pub const BURST_SIZE: usize = 32;

/// Up to `N` owned mbufs, stored contiguously so DPDK's burst calls can fill and drain the
/// array directly. Whatever is still in the burst when it drops is freed in bulk.
pub struct Burst<const N: usize = BURST_SIZE> {
    len: usize,
    ptrs: [*mut rte_mbuf; N],
}

// SAFETY: the burst owns its mbufs exclusively.
unsafe impl<const N: usize> Send for Burst<N> {}

impl<const N: usize> Default for Burst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Burst<N> {
    /// Capacity of the burst.
    pub const CAPACITY: usize = N;

    /// An empty burst.
    pub const fn new() -> Self {
        Burst {
            len: 0,
            ptrs: [core::ptr::null_mut(); N],
        }
    }

    /// Number of mbufs held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no mbuf is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no more mbufs fit.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Adds an mbuf; hands it back if the burst is full.
    #[inline(always)]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.ptrs[self.len] = m.into_raw().as_ptr();
        self.len += 1;
        Ok(())
    }

    /// Takes the last mbuf out.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<Mbuf> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: slots below the old len hold owned, non-null mbufs.
        Some(unsafe { Mbuf::from_raw(NonNull::new_unchecked(self.ptrs[self.len])) })
    }

    /// Borrows the mbuf at `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&Mbuf> {
        if i >= self.len {
            return None;
        }
        // SAFETY: Mbuf is a transparent wrapper of a non-null pointer, and slot i is owned.
        Some(unsafe { &*(&self.ptrs[i] as *const *mut rte_mbuf as *const Mbuf) })
    }

    /// Mutably borrows the mbuf at `i`.
    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Mbuf> {
        if i >= self.len {
            return None;
        }
        // SAFETY: as in `get`, with exclusive access through &mut self.
        Some(unsafe { &mut *(&mut self.ptrs[i] as *mut *mut rte_mbuf as *mut Mbuf) })
    }

    /// The held mbufs as a slice, in order.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [Mbuf] {
        // SAFETY: Mbuf is a transparent wrapper of a non-null pointer; slots below len hold
        // owned mbufs, and the slice borrows the burst exclusively.
        unsafe { core::slice::from_raw_parts_mut(self.ptrs.as_mut_ptr().cast::<Mbuf>(), self.len) }
    }

    /// The held mbufs as a slice, in order.
    #[inline(always)]
    pub fn as_slice(&self) -> &[Mbuf] {
        // SAFETY: as in `as_mut_slice`, shared.
        unsafe { core::slice::from_raw_parts(self.ptrs.as_ptr().cast::<Mbuf>(), self.len) }
    }

    /// Moves every mbuf out, in order; what the iterator does not yield is freed when it drops.
    #[inline(always)]
    pub fn drain(&mut self) -> Drain<'_, N> {
        let len = self.len;
        self.len = 0;
        Drain {
            burst: self,
            next: 0,
            end: len,
        }
    }

    /// Fills the free slots with fresh mbufs from `pool` in one bulk call; returns how many
    /// were added (0 when the pool cannot give them all).
    #[inline]
    pub fn alloc_fill(&mut self, pool: &super::Mempool<'_>) -> usize {
        let (ptr, room) = self.spare_raw();
        if room == 0 {
            return 0;
        }
        // SAFETY: the pool is alive; ptr has `room` free slots; on success every slot holds
        // an owned mbuf, on failure none was taken.
        let rc = unsafe { dpdk_sys::rte_pktmbuf_alloc_bulk(pool.as_ptr(), ptr, room as u32) };
        if rc != 0 {
            return 0;
        }
        // SAFETY: filled above.
        unsafe { self.commit(room) };
        room
    }

    /// Frees every mbuf in one bulk call.
    #[inline]
    pub fn clear(&mut self) {
        if self.len > 0 {
            // SAFETY: slots below len hold owned mbufs; free_bulk takes them all.
            unsafe { dpdk_sys::rte_pktmbuf_free_bulk(self.ptrs.as_mut_ptr(), self.len as u32) };
            self.len = 0;
        }
    }

    /// Free slots at the end, for a driver to fill: (pointer to the first free slot, count).
    #[inline(always)]
    pub(crate) fn spare_raw(&mut self) -> (*mut *mut rte_mbuf, usize) {
        // SAFETY: len <= N, so the pointer stays inside (or one past) the array.
        (
            unsafe { self.ptrs.as_mut_ptr().add(self.len) },
            N - self.len,
        )
    }

    /// Records that a driver filled `n` more slots after the current ones.
    ///
    /// # Safety
    /// The `n` slots after `len` must now hold owned, valid mbufs, each as
    /// [`Mbuf::from_raw`] asks (data of its own).
    #[inline(always)]
    pub(crate) unsafe fn commit(&mut self, n: usize) {
        // A driver that says it filled more slots than it was given would have the burst
        // read past its array: checked once per burst.
        assert!(
            n <= N - self.len,
            "the driver filled {n} of {} slots",
            N - self.len
        );
        self.len += n;
    }

    /// The held pointers, for a driver to send.
    #[inline(always)]
    pub(crate) fn filled_raw(&mut self) -> (*mut *mut rte_mbuf, usize) {
        (self.ptrs.as_mut_ptr(), self.len)
    }

    /// Forgets the first `n` mbufs (a driver took them) and moves the rest to the front.
    #[inline(always)]
    pub(crate) fn consume_front(&mut self, n: usize) {
        debug_assert!(n <= self.len);
        if n == self.len {
            self.len = 0;
            return;
        }
        self.ptrs.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Moves the mbufs out of a [`Burst`]; see [`Burst::drain`].
pub struct Drain<'a, const N: usize> {
    burst: &'a mut Burst<N>,
    next: usize,
    end: usize,
}

impl<const N: usize> Iterator for Drain<'_, N> {
    type Item = Mbuf;

    #[inline(always)]
    fn next(&mut self) -> Option<Mbuf> {
        if self.next == self.end {
            return None;
        }
        let p = self.burst.ptrs[self.next];
        self.next += 1;
        // SAFETY: slots in next..end were owned by the burst and are handed out once.
        Some(unsafe { Mbuf::from_raw(NonNull::new_unchecked(p)) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.end - self.next, Some(self.end - self.next))
    }
}

impl<const N: usize> ExactSizeIterator for Drain<'_, N> {}

impl<const N: usize> Drop for Drain<'_, N> {
    fn drop(&mut self) {
        let rest = self.end - self.next;
        if rest > 0 {
            // SAFETY: the remaining slots are owned and not yet handed out.
            unsafe {
                dpdk_sys::rte_pktmbuf_free_bulk(
                    self.burst.ptrs.as_mut_ptr().add(self.next),
                    rest as u32,
                )
            };
        }
    }
}
