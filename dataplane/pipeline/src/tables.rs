//! The switch's tables as plain values: what the pipeline needs to know about its ports and
//! routes, built by the control side from the configuration (or by the emulator from a
//! topology). Nothing here knows about files or DPDK.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use telemetry::wire::MacAddr;

/// Largest number of ports one switch drives: DPDK's own limit (`RTE_MAX_ETHPORTS`, 32 in
/// the distribution's build), so that a lab switch may have up to 31 neighbours. Port indices
/// fit in a `u16` verdict and a 32-bit port mask.
pub const MAX_PORTS: usize = 32;

/// What sits behind a port: hosts (`edge`) or other PINT switches (`fabric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortRole {
    /// Hosts behind the port: telemetry starts on receive and ends on transmit.
    Edge,
    /// Other PINT switches behind the port: telemetry passes through.
    Fabric,
}

/// One port as the pipeline sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    /// The port's own MAC: the source MAC of frames it sends, and the destination MAC it
    /// accepts when not promiscuous.
    pub mac: MacAddr,
    /// Whether it accepts frames for any destination MAC.
    pub promiscuous: bool,
    /// Edge or fabric.
    pub role: PortRole,
    /// Largest IPv4 packet (L3 bytes) the port sends; the telemetry shim counts against it.
    pub mtu: u16,
    /// Line rate in bit/s (for link utilisation).
    pub capacity_bps: u64,
}

/// One next hop of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHopSpec {
    /// Egress port index.
    pub port: u16,
    /// The next hop's MAC (destination of forwarded frames).
    pub mac: MacAddr,
}

/// One IPv4 route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// Network address (host order, host bits zero).
    pub addr: u32,
    /// Prefix length, 0 to 32.
    pub len: u8,
    /// One next hop, or several forming an ECMP group (at most 64). Shared: a table of a
    /// million routes usually has a few groups, and its routes should not each hold a copy.
    pub next_hops: Arc<[NextHopSpec]>,
}

/// Everything the forwarding step reads, as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    /// The ports, by index.
    pub ports: Vec<PortSpec>,
    /// The routes.
    pub routes: Vec<RouteSpec>,
    /// Seed of the ECMP choice (switches with the same seed pick alike).
    pub ecmp_seed: u64,
}
