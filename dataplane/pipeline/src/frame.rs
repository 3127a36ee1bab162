//! What the pipeline needs from a packet buffer: its bytes, and room in front of them to
//! insert a header (the telemetry shim) or give some back. DPDK's mbuf implements it in the
//! switch; [`VecFrame`] implements it over a vector for tests and the emulator.

/// A packet buffer with headroom. Only the first segment is touched.
pub trait PacketBuf {
    /// The first segment's bytes.
    fn data(&self) -> &[u8];
    /// The first segment's bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// The whole packet's length (all segments).
    fn pkt_len(&self) -> usize;
    /// Free bytes in front of the data.
    fn headroom(&self) -> usize;
    /// Grows the packet by `n` bytes at the front (their content is unspecified); false,
    /// changing nothing, when the headroom is smaller.
    fn prepend(&mut self, n: usize) -> bool;
    /// Removes `n` bytes from the front; false, changing nothing, when the first segment is
    /// shorter.
    fn adj(&mut self, n: usize) -> bool;
    /// Starts loading the packet's first bytes into the cache (a hint; may do nothing).
    #[inline(always)]
    fn prefetch(&self) {}
}

/// A packet in a vector, with headroom, for tests and the emulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VecFrame {
    buf: Vec<u8>,
    start: usize,
}

impl VecFrame {
    /// Headroom a new frame gets, as DPDK's default mbuf headroom.
    pub const HEADROOM: usize = 128;

    /// A frame holding `bytes`, with [`VecFrame::HEADROOM`] bytes in front.
    pub fn new(bytes: &[u8]) -> VecFrame {
        VecFrame::with_headroom(bytes, Self::HEADROOM)
    }

    /// A frame holding `bytes` with `headroom` free bytes in front.
    pub fn with_headroom(bytes: &[u8], headroom: usize) -> VecFrame {
        let mut buf = vec![0u8; headroom + bytes.len()];
        buf[headroom..].copy_from_slice(bytes);
        VecFrame {
            buf,
            start: headroom,
        }
    }

    /// Replaces the frame's content with `bytes` and its headroom with
    /// [`VecFrame::HEADROOM`], reusing the buffer (no allocation once it is large enough).
    pub fn reset(&mut self, bytes: &[u8]) {
        self.buf.clear();
        self.buf.resize(Self::HEADROOM, 0);
        self.buf.extend_from_slice(bytes);
        self.start = Self::HEADROOM;
    }

    /// The frame's bytes, as a vector.
    pub fn into_bytes(mut self) -> Vec<u8> {
        self.buf.drain(..self.start);
        self.buf
    }
}

impl PacketBuf for VecFrame {
    fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..]
    }

    fn pkt_len(&self) -> usize {
        self.buf.len() - self.start
    }

    fn headroom(&self) -> usize {
        self.start
    }

    fn prepend(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        true
    }

    fn adj(&mut self, n: usize) -> bool {
        if n > self.buf.len() - self.start {
            return false;
        }
        self.start += n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepend_and_adj_move_the_front() {
        let mut f = VecFrame::with_headroom(&[1, 2, 3], 2);
        assert!(!f.prepend(3));
        assert!(f.prepend(2));
        f.data_mut()[..2].copy_from_slice(&[8, 9]);
        assert_eq!(f.data(), &[8, 9, 1, 2, 3]);
        assert_eq!(f.headroom(), 0);
        assert!(f.adj(3));
        assert_eq!(f.data(), &[2, 3]);
        assert!(!f.adj(3));
        assert_eq!(f.pkt_len(), 2);
        assert_eq!(f.into_bytes(), vec![2, 3]);
    }
}
