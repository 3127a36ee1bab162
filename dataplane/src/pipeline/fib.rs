//! The forwarding table: routes (LPM) to next-hop groups (one hop, or several for ECMP).

use control::Config;
use telemetry::wire::MacAddr;

use super::lpm::{Lpm, LpmError};

/// One next hop: the egress port (index into the configuration's ports) and the MAC to send to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Egress port index.
    pub port: u16,
    /// Destination MAC of forwarded frames.
    pub mac: MacAddr,
}

/// Routes and their next-hop groups, read-only once built.
pub struct Fib {
    lpm: Lpm,
    groups: Vec<(u32, u32)>,
    hops: Vec<NextHop>,
}

impl Fib {
    /// Builds the table from the configuration's routes.
    pub fn from_config(config: &Config) -> Result<Fib, LpmError> {
        let mut groups = Vec::with_capacity(config.routes.len());
        let mut hops = Vec::new();
        let mut entries = Vec::with_capacity(config.routes.len());
        for (i, r) in config.routes.iter().enumerate() {
            groups.push((hops.len() as u32, r.next_hops.len() as u32));
            hops.extend(r.next_hops.iter().map(|h| NextHop { port: h.port_index as u16, mac: h.mac }));
            entries.push((r.prefix.addr, r.prefix.len, i as u32));
        }
        Ok(Fib { lpm: Lpm::build(&entries)?, groups, hops })
    }

    /// The next hops of the longest matching route for `dst` (host order).
    #[inline(always)]
    pub fn lookup(&self, dst: u32) -> Option<&[NextHop]> {
        let g = self.lpm.lookup(dst)?;
        let (start, len) = self.groups[g as usize];
        Some(&self.hops[start as usize..(start + len) as usize])
    }

    /// Number of routes.
    pub fn routes(&self) -> usize {
        self.groups.len()
    }

    /// Memory of the prefix table in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.lpm.memory_bytes()
    }
}
