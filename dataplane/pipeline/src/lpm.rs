//! Longest-prefix match for IPv4: a three-level multibit trie with strides 16, 8 and 8.
//!
//! The first level is a flat table of 65 536 entries indexed by the top 16 address bits
//! (256 KiB, cache-friendly for typical route tables); prefixes longer than /16 and /24
//! hang 256-entry groups below. A lookup is one to three dependent loads, no branches on
//! prefix length. Tables are built once from the route list and then read-only, so workers
//! share them without locks; a route change builds a new table.

/// Marks an entry that points to a 256-entry group instead of holding a value.
const GROUP: u32 = 1 << 31;
/// The largest value an entry can hold.
pub const MAX_VALUE: u32 = GROUP - 2;

/// An immutable IPv4 longest-prefix-match table mapping prefixes to values.
pub struct Lpm {
    level1: Box<[u32; 1 << 16]>,
    groups: Vec<u32>,
}

/// Why a table could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    /// A prefix length above 32.
    #[error("prefix length {0} is above 32")]
    BadLength(u8),
    /// A value too large to store.
    #[error("value {0} is too large")]
    BadValue(u32),
    /// A route with no next hop or more than 127.
    #[error("a route has {0} next hops (1 to 127)")]
    BadNextHops(usize),
    /// The routes' distinct next-hop groups hold more hops together than the table does.
    #[error("the routes' distinct next-hop groups hold more than {0} next hops together")]
    TooManyNextHops(usize),
    /// A next hop names a port the switch does not have.
    #[error("a next hop names port {0}, which does not exist")]
    NoSuchPort(u16),
}

impl Lpm {
    /// Builds a table from `(address, length, value)` triples (addresses host-order, host bits
    /// ignored). When two entries have the same prefix the later one wins.
    pub fn build(routes: &[(u32, u8, u32)]) -> Result<Lpm, LpmError> {
        let mut sorted: Vec<(u32, u8, u32)> = Vec::with_capacity(routes.len());
        for &(addr, len, value) in routes {
            if len > 32 {
                return Err(LpmError::BadLength(len));
            }
            if value > MAX_VALUE {
                return Err(LpmError::BadValue(value));
            }
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            sorted.push((addr & mask, len, value + 1));
        }
        // Shorter prefixes first: a longer prefix then overwrites the part it covers.
        sorted.sort_by_key(|r| r.1);
        let mut lpm = Lpm {
            level1: vec![0u32; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("size"),
            groups: Vec::new(),
        };
        for (addr, len, stored) in sorted {
            lpm.insert(addr, len, stored);
        }
        Ok(lpm)
    }

    fn new_group(&mut self, fill: u32) -> u32 {
        let g = (self.groups.len() / 256) as u32;
        self.groups.extend(std::iter::repeat_n(fill, 256));
        g | GROUP
    }

    fn insert(&mut self, addr: u32, len: u8, stored: u32) {
        let hi = (addr >> 16) as usize;
        if len <= 16 {
            let span = 1usize << (16 - len);
            self.level1[hi..hi + span].fill(stored);
            return;
        }
        let mut e1 = self.level1[hi];
        if e1 & GROUP == 0 {
            e1 = self.new_group(e1);
            self.level1[hi] = e1;
        }
        let g1 = ((e1 & !GROUP) as usize) * 256;
        let mid = ((addr >> 8) & 0xff) as usize;
        if len <= 24 {
            let span = 1usize << (24 - len);
            self.groups[g1 + mid..g1 + mid + span].fill(stored);
            return;
        }
        let mut e2 = self.groups[g1 + mid];
        if e2 & GROUP == 0 {
            e2 = self.new_group(e2);
            self.groups[g1 + mid] = e2;
        }
        let g2 = ((e2 & !GROUP) as usize) * 256;
        let lo = (addr & 0xff) as usize;
        let span = 1usize << (32 - len);
        self.groups[g2 + lo..g2 + lo + span].fill(stored);
    }

    /// The value of the longest prefix that contains `addr` (host order), if any.
    #[inline(always)]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut e = self.level1[(addr >> 16) as usize];
        if e & GROUP != 0 {
            e = self.groups[((e & !GROUP) as usize) * 256 + ((addr >> 8) & 0xff) as usize];
            if e & GROUP != 0 {
                e = self.groups[((e & !GROUP) as usize) * 256 + (addr & 0xff) as usize];
            }
        }
        e.checked_sub(1)
    }

    /// Memory the table uses, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.level1.len() * 4 + self.groups.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(routes: &[(u32, u8, u32)], addr: u32) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for &(a, len, v) in routes {
            let mask = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            if addr & mask == a & mask && best.is_none_or(|(l, _)| len >= l) {
                best = Some((len, v));
            }
        }
        best.map(|(_, v)| v)
    }

    #[test]
    fn basic_prefixes() {
        let routes = [
            (0x0a00_0000, 8, 1),
            (0x0a01_0000, 16, 2),
            (0x0a01_0200, 24, 3),
            (0x0a01_0280, 25, 4),
            (0x0a01_0281, 32, 5),
        ];
        let lpm = Lpm::build(&routes).unwrap();
        assert_eq!(lpm.lookup(0x0a05_0505), Some(1));
        assert_eq!(lpm.lookup(0x0a01_0505), Some(2));
        assert_eq!(lpm.lookup(0x0a01_0205), Some(3));
        assert_eq!(lpm.lookup(0x0a01_02f0), Some(4));
        assert_eq!(lpm.lookup(0x0a01_0281), Some(5));
        assert_eq!(lpm.lookup(0x0b00_0000), None);
        let with_default = Lpm::build(&[(0, 0, 9), (0x0a01_0281, 32, 5)]).unwrap();
        assert_eq!(with_default.lookup(0xffff_ffff), Some(9));
        assert_eq!(with_default.lookup(0x0a01_0281), Some(5));
        assert_eq!(with_default.lookup(0x0a01_0282), Some(9));
        assert_eq!(
            Lpm::build(&[(0, 33, 1)]).err(),
            Some(LpmError::BadLength(33))
        );
    }

    proptest! {
        #[test]
        fn matches_linear_search(
            routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u32..1000), 0..40),
            probes in proptest::collection::vec(any::<u32>(), 50),
        ) {
            // Make a later duplicate prefix win, as documented, by keeping the last one only.
            let mut dedup: Vec<(u32, u8, u32)> = Vec::new();
            for &(a, l, v) in &routes {
                let mask = if l == 0 { 0 } else { u32::MAX << (32 - u32::from(l)) };
                dedup.retain(|&(b, m, _)| !(m == l && b & mask == a & mask));
                dedup.push((a, l, v));
            }
            let lpm = Lpm::build(&routes).unwrap();
            // Probe random addresses and addresses inside each prefix.
            let inside = routes.iter().map(|r| r.0);
            for addr in probes.into_iter().chain(inside) {
                prop_assert_eq!(lpm.lookup(addr), naive(&dedup, addr), "addr {:08x}", addr);
            }
        }
    }
}
