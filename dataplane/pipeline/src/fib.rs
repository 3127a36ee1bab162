//! The forwarding table: routes (LPM) to next-hop groups (one hop, or several for ECMP).

use telemetry::wire::MacAddr;

use std::collections::{HashMap, HashSet};

use crate::lpm::{Lpm, LpmError};
use crate::tables::{NextHopSpec, Tables};

/// One next hop: the egress port (index into the configuration's ports), the MAC to send to,
/// and what the rewrite needs from the egress port, kept together for one cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Egress port index.
    pub port: u16,
    /// The egress port's MTU.
    pub mtu: u16,
    /// The new Ethernet addresses: destination (the next hop) then source (the egress port).
    pub macs: [u8; 12],
}

impl NextHop {
    /// The next hop's MAC (destination of forwarded frames).
    pub fn mac(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.macs[..6]);
        MacAddr(m)
    }
}

/// Bits of an LPM value that hold the next-hop count; the rest hold the first hop's index.
const COUNT_BITS: u32 = 7;

/// Destinations a router does not forward (RFC 1812 5.3.7): "this network" 0/8, loopback
/// 127/8, multicast 224/4, reserved 240/4 and the limited broadcast 255.255.255.255. The
/// table holds them as prefixes of their own, below any configured route of the same
/// prefix, so that a default route (or a route covering one, such as 224/3) does not carry
/// them, and a route for 240/4 does not carry the limited broadcast.
pub const MARTIANS: [(u32, u8); 5] = [
    (0x0000_0000, 8),
    (0x7f00_0000, 8),
    (0xe000_0000, 4),
    (0xf000_0000, 4),
    (0xffff_ffff, 32),
];

/// The LPM value of a martian prefix: no next hop, starting past any next hop there is, so
/// a lookup gives none without a test of its own.
const MARTIAN_VALUE: u32 = crate::lpm::MAX_VALUE & !((1 << COUNT_BITS) - 1);

/// Most next-hop entries the table holds: every distinct next-hop group's hops together
/// (routes with the same group share its entries). A martian's value starts past them.
pub const MAX_NEXT_HOP_ENTRIES: usize = (MARTIAN_VALUE >> COUNT_BITS) as usize - 1;

/// The next-hop entries `routes` take in the table: the hops of each distinct group once.
pub fn next_hop_entries<'a>(routes: impl IntoIterator<Item = &'a [NextHopSpec]>) -> usize {
    let mut seen: HashSet<&[NextHopSpec]> = HashSet::new();
    routes
        .into_iter()
        .filter(|g| seen.insert(*g))
        .map(<[NextHopSpec]>::len)
        .sum()
}

/// Whether `dst` (host order) is a destination a router does not forward ([`MARTIANS`]).
#[inline(always)]
pub fn is_martian(dst: u32) -> bool {
    let top = dst >> 24;
    top == 0 || top == 127 || top >= 224
}

/// Why a packet to `dst` has no next hop: `martian` or `no_route`.
#[cold]
pub fn unroutable(dst: u32) -> crate::DropReason {
    if is_martian(dst) {
        crate::DropReason::Martian
    } else {
        crate::DropReason::NoRoute
    }
}

/// Routes and their next-hop groups, read-only once built. The LPM value of a route encodes
/// where its next hops start in `hops` and how many there are, so a lookup is the prefix
/// table's loads plus one.
pub struct Fib {
    lpm: Lpm,
    routes: usize,
    hops: Vec<NextHop>,
}

impl Fib {
    /// Builds the table from the routes; every next hop's port must exist, a route has 1 to
    /// 127 next hops (the configuration allows 64), and the distinct groups at most [`MAX_NEXT_HOP_ENTRIES`] hops
    /// together (the configuration checks each with key names). Routes with the same group
    /// share its entries.
    pub fn new(tables: &Tables) -> Result<Fib, LpmError> {
        let mut hops = Vec::new();
        let mut groups: HashMap<&[NextHopSpec], u32> = HashMap::new();
        let mut entries = Vec::with_capacity(MARTIANS.len() + tables.routes.len());
        // First: a configured route of the same prefix, later in the list, wins.
        entries.extend(MARTIANS.map(|(addr, len)| (addr, len, MARTIAN_VALUE)));
        for r in &tables.routes {
            if r.next_hops.is_empty() || r.next_hops.len() >= 1 << COUNT_BITS {
                return Err(LpmError::BadNextHops(r.next_hops.len()));
            }
            if let Some(&start) = groups.get(&r.next_hops[..]) {
                entries.push((
                    r.addr,
                    r.len,
                    (start << COUNT_BITS) | r.next_hops.len() as u32,
                ));
                continue;
            }
            if hops.len() + r.next_hops.len() > MAX_NEXT_HOP_ENTRIES {
                return Err(LpmError::TooManyNextHops(MAX_NEXT_HOP_ENTRIES));
            }
            let start = hops.len() as u32;
            groups.insert(&r.next_hops[..], start);
            entries.push((
                r.addr,
                r.len,
                (start << COUNT_BITS) | r.next_hops.len() as u32,
            ));
            for h in r.next_hops.iter() {
                let egress = tables
                    .ports
                    .get(usize::from(h.port))
                    .ok_or(LpmError::NoSuchPort(h.port))?;
                let mut macs = [0u8; 12];
                macs[..6].copy_from_slice(&h.mac.0);
                macs[6..].copy_from_slice(&egress.mac.0);
                hops.push(NextHop {
                    port: h.port,
                    mtu: egress.mtu,
                    macs,
                });
            }
        }
        Ok(Fib {
            lpm: Lpm::build(&entries)?,
            routes: tables.routes.len(),
            hops,
        })
    }

    /// The next hops of the longest matching route for `dst` (host order); None without one,
    /// and for a martian destination ([`unroutable`] says which).
    #[inline(always)]
    pub fn lookup(&self, dst: u32) -> Option<&[NextHop]> {
        let v = self.lpm.lookup(dst)?;
        let start = (v >> COUNT_BITS) as usize;
        let len = (v & ((1 << COUNT_BITS) - 1)) as usize;
        self.hops.get(start..start + len)
    }

    /// Next-hop entries the table holds (each distinct group's hops once).
    pub fn next_hop_entries(&self) -> usize {
        self.hops.len()
    }

    /// Number of routes.
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Memory of the prefix table in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.lpm.memory_bytes()
    }
}
