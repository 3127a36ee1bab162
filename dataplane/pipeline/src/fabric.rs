//! Switch tables worked out from a topology: every switch gets one edge port (its hosts)
//! and one fabric port per neighbour, and routes to every other switch's hosts along
//! shortest paths, with ECMP over all equal-cost next hops. Nobody writes routes or next-hop
//! MACs by hand; the emulator and the lab launcher both start from here.
//!
//! Addressing: the hosts of node `n` live in `10.(n >> 8).(n & 255).0/24`; port 0 of a switch
//! is its edge port, port `j + 1` faces its `j`-th neighbour (in the topology's sorted
//! neighbour order); port `p` of node `n` has MAC `02:00:nn:nn:nn:pp` (locally administered,
//! unicast), and hosts behind node `n` use `02:01:nn:nn:nn:00`.

use telemetry::topology::Topology;
use telemetry::wire::MacAddr;
use telemetry::wire::shim::{MAX_DIGEST_BYTES, shim_len};

use crate::tables::{MAX_PORTS, NextHopSpec, PortRole, PortSpec, RouteSpec, Tables};

/// Why a topology cannot become switch tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// A switch has more neighbours than a switch has fabric ports.
    #[error("switch {switch} has {neighbours} neighbours; a switch drives at most {} fabric ports", MAX_PORTS - 1)]
    TooManyNeighbours {
        /// The switch (node number).
        switch: u32,
        /// Its neighbours.
        neighbours: usize,
    },
    /// More switches than the addressing plan holds.
    #[error("{0} switches; the addressing plan holds at most 65536")]
    TooManySwitches(usize),
}

/// The hosts' prefix of node `n`: (address, length).
pub fn host_prefix(n: u32) -> (u32, u8) {
    (0x0a00_0000 | ((n & 0xffff) << 8), 24)
}

/// Host `h` (1 to 254) behind node `n`.
pub fn host_addr(n: u32, h: u8) -> u32 {
    host_prefix(n).0 | u32::from(h)
}

/// The node whose hosts own `addr`, if it is in the addressing plan.
pub fn node_of(addr: u32) -> Option<u32> {
    (addr >> 24 == 10).then_some((addr >> 8) & 0xffff)
}

/// The MAC of port `p` of node `n`.
pub fn port_mac(n: u32, p: u16) -> MacAddr {
    let b = n.to_be_bytes();
    MacAddr([0x02, 0x00, b[1], b[2], b[3], p as u8])
}

/// The MAC of the hosts behind node `n`.
pub fn host_mac(n: u32) -> MacAddr {
    let b = n.to_be_bytes();
    MacAddr([0x02, 0x01, b[1], b[2], b[3], 0])
}

/// The port of node `n` that faces neighbour `v`.
pub fn port_towards(t: &Topology, n: u32, v: u32) -> Option<u16> {
    t.neighbours(n)
        .iter()
        .position(|&x| x == v)
        .map(|j| j as u16 + 1)
}

/// Bytes a fabric port's MTU leaves above the edge ports': the longest shim any plan writes.
/// A packet the shim would push past a fabric port's MTU crosses it without telemetry
/// (`no_telemetry_mtu`), so without this room the largest packets hosts send, often most of
/// a bulk transfer's, would carry none.
pub const SHIM_ROOM: u16 = shim_len(MAX_DIGEST_BYTES) as u16;

/// The MTUs of a fabric's ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mtus {
    /// The edge ports' (hosts').
    pub edge: u16,
    /// The fabric ports'.
    pub fabric: u16,
}

impl Mtus {
    /// Edge ports of `edge` and fabric ports with [`SHIM_ROOM`] more: every packet hosts
    /// may send carries telemetry, whatever the plan.
    pub fn with_shim_room(edge: u16) -> Mtus {
        Mtus {
            edge,
            fabric: edge.saturating_add(SHIM_ROOM),
        }
    }
}

/// The tables of node `n`: ports of `capacity_bps` and `mtu`, routes to every reachable
/// switch's hosts.
pub fn tables(
    t: &Topology,
    n: u32,
    capacity_bps: u64,
    mtu: Mtus,
    ecmp_seed: u64,
) -> Result<Tables, FabricError> {
    if t.len() > 1 << 16 {
        return Err(FabricError::TooManySwitches(t.len()));
    }
    let neighbours = t.neighbours(n);
    if neighbours.len() >= MAX_PORTS {
        return Err(FabricError::TooManyNeighbours {
            switch: n,
            neighbours: neighbours.len(),
        });
    }
    let port = |p: u16, role| PortSpec {
        mac: port_mac(n, p),
        promiscuous: true,
        role,
        mtu: match role {
            PortRole::Edge => mtu.edge,
            PortRole::Fabric => mtu.fabric,
        },
        capacity_bps,
    };
    let mut ports = vec![port(0, PortRole::Edge)];
    ports.extend((1..=neighbours.len() as u16).map(|p| port(p, PortRole::Fabric)));
    // Distances from every neighbour decide the equal-cost next hops towards each switch.
    let dist: Vec<Vec<u32>> = neighbours.iter().map(|&v| t.bfs(v).0).collect();
    let own = t.bfs(n).0;
    let mut routes = Vec::with_capacity(t.len());
    for d in 0..t.len() as u32 {
        let (addr, len) = host_prefix(d);
        let next_hops: Vec<NextHopSpec> = if d == n {
            vec![NextHopSpec {
                port: 0,
                mac: host_mac(n),
            }]
        } else if own[d as usize] == u32::MAX {
            continue;
        } else {
            neighbours
                .iter()
                .enumerate()
                .filter(|(j, _)| dist[*j][d as usize] + 1 == own[d as usize])
                .take(64)
                .map(|(j, &v)| NextHopSpec {
                    port: j as u16 + 1,
                    mac: port_mac(v, port_towards(t, v, n).expect("links are symmetric")),
                })
                .collect()
        };
        routes.push(RouteSpec {
            addr,
            len,
            next_hops: next_hops.into(),
        });
    }
    Ok(Tables {
        ports,
        routes,
        ecmp_seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat_tree_routes_spread_over_equal_paths() {
        let t = Topology::fat_tree(4);
        let edges = Topology::fat_tree_edges(4);
        let (a, b) = (edges[0], edges[7]);
        let tab = tables(&t, a, 10_000_000_000, Mtus::with_shim_room(1500), 1).unwrap();
        assert_eq!(tab.ports[0].role, PortRole::Edge);
        assert_eq!(tab.ports[0].mtu, 1500);
        assert!(tab.ports[1..].iter().all(|p| p.mtu == 1514));
        assert_eq!(tab.ports.len(), 1 + t.neighbours(a).len());
        let to_b = tab
            .routes
            .iter()
            .find(|r| r.addr == host_prefix(b).0)
            .unwrap();
        // An edge switch reaches another pod through either of its two aggregation switches.
        assert_eq!(to_b.next_hops.len(), 2);
        let own = tab
            .routes
            .iter()
            .find(|r| r.addr == host_prefix(a).0)
            .unwrap();
        assert_eq!(own.next_hops[0].port, 0);
        assert_eq!(node_of(host_addr(b, 9)), Some(b));
        assert_eq!(port_mac(0x123456, 3).0, [2, 0, 0x12, 0x34, 0x56, 3]);
    }
}
