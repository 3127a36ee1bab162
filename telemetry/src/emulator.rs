//! A fabric emulator in plain Rust: packets of flows travel along shortest paths of a
//! topology through one PINT encoder per switch (the plan's [`Plan::encode`], hop index from
//! a decrementing TTL, digest carried between hops as the shim would carry it), and the last
//! hop hands the digest to the sink side. Tests and reproductions use it; no DPDK involved.

use crate::packet_id::{PacketFields, hop_index};
use crate::pint::plan::{HopInput, Plan};
use crate::topology::Topology;

/// TTL the emulated hosts send with.
pub const HOST_TTL: u8 = 64;

/// A flow routed through the fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatedFlow {
    /// The header fields (the IPv4 identification changes per packet).
    pub fields: PacketFields,
    /// The switches on the path, as node numbers, first hop first.
    pub nodes: Vec<u32>,
}

impl EmulatedFlow {
    /// The path as switch IDs.
    pub fn switch_ids(&self, t: &Topology) -> Vec<u32> {
        self.nodes.iter().map(|&n| t.switch_id(n)).collect()
    }
}

/// What the last hop delivers to the sink for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// Packet ID.
    pub pid: u32,
    /// Path length as the last hop computed it from the TTL.
    pub k: usize,
    /// The digest as it left the last hop.
    pub digest: u64,
    /// The last hop's switch ID.
    pub sink_switch: u32,
}

/// The emulated fabric.
#[derive(Debug, Clone)]
pub struct Fabric<'a> {
    /// The topology.
    pub topology: &'a Topology,
    /// The plan every switch runs.
    pub plan: &'a Plan,
}

impl<'a> Fabric<'a> {
    /// A fabric running `plan` on every switch of `topology`.
    pub fn new(topology: &'a Topology, plan: &'a Plan) -> Fabric<'a> {
        Fabric { topology, plan }
    }

    /// A flow from the hosts behind switch `src` to those behind `dst` (node numbers), on
    /// the shortest path.
    pub fn flow(&self, src: u32, dst: u32, fields: PacketFields) -> Option<EmulatedFlow> {
        let nodes = self.topology.shortest_path(src, dst)?;
        (nodes.len() <= usize::from(HOST_TTL)).then_some(EmulatedFlow { fields, nodes })
    }

    /// Sends one packet of `flow` with IPv4 identification `ident`. `measure(hop, node)`
    /// gives what each switch measures (latency, queue, utilization); the fabric fills in
    /// the packet ID, hop index, switch ID and ports.
    pub fn send(
        &self,
        flow: &EmulatedFlow,
        ident: u16,
        mut measure: impl FnMut(usize, u32) -> HopInput,
    ) -> Delivery {
        let fields = PacketFields {
            ident,
            ..flow.fields
        };
        let pid = fields.packet_id();
        let mut ttl = HOST_TTL;
        let mut digest = 0u64;
        let mut k = 0;
        for (pos, &node) in flow.nodes.iter().enumerate() {
            let hop = usize::from(hop_index(ttl).expect("TTL above 0 inside the fabric"));
            let next = flow.nodes.get(pos + 1).copied();
            let prev = pos.checked_sub(1).map(|p| flow.nodes[p]);
            let port_to = |other: Option<u32>| -> u32 {
                other
                    .and_then(|o| self.topology.neighbours(node).iter().position(|&n| n == o))
                    .map_or(0, |p| p as u32 + 1)
            };
            let mut input = measure(hop, node);
            input.pid = pid;
            input.hop = hop;
            input.switch_id = self.topology.switch_id(node);
            input.ingress_port = port_to(prev);
            input.egress_port = port_to(next);
            digest = self.plan.encode(digest, &input);
            k = hop;
            ttl -= 1;
        }
        Delivery {
            pid,
            k,
            digest,
            sink_switch: self
                .topology
                .switch_id(*flow.nodes.last().expect("path has a hop")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pint::path_decoder::Space;
    use crate::pint::query::QueryFile;
    use crate::pint::recording::FlowRecorder;
    use crate::sim_rng::SimRng;

    /// The paper's concurrent plan on a K = 8 fat tree: every flow's path decodes, per-hop
    /// latency medians come out near the truth, and the bottleneck utilization is found.
    #[test]
    fn paper_plan_end_to_end_on_a_fat_tree() {
        let t = Topology::fat_tree(8);
        let plan = Plan::compile(&QueryFile::paper_example()).unwrap();
        let fabric = Fabric::new(&t, &plan);
        let path_q = plan.query_index("path").unwrap();
        let lat_q = plan.query_index("latency").unwrap();
        let util_q = plan.query_index("utilization").unwrap();
        let edges = Topology::fat_tree_edges(8);
        let mut rng = SimRng::new(11);
        for f in 0..40u32 {
            let src = edges[rng.below(32) as usize];
            let mut dst = edges[rng.below(32) as usize];
            if dst == src {
                dst = edges[(edges.iter().position(|&e| e == src).unwrap() + 1) % 32];
            }
            let fields = PacketFields {
                src: 0x0a00_0000 + f,
                dst: 0x0a10_0000 + f,
                protocol: 6,
                src_port: 1000,
                dst_port: 80,
                ident: 0,
                tcp_seq: 0,
            };
            let flow = fabric.flow(src, dst, fields).unwrap();
            let k = flow.nodes.len();
            let mut rec = FlowRecorder::new(&plan, k, Space::Topology(&t), Some(t.switch_id(dst)));
            // Hop h's latency: around 2000 * h ns; utilization peaks at the middle hop.
            for ident in 0..3000u16 {
                let d = fabric.send(&flow, ident, |hop, _| HopInput {
                    hop_latency_ns: 2000.0 * hop as f64 * (0.5 + rng.unit()),
                    utilization: if hop == k.div_ceil(2) { 0.9 } else { 0.3 },
                    ..Default::default()
                });
                assert_eq!(d.k, k);
                rec.record(d.pid, d.digest);
            }
            let path = rec.path(path_q).unwrap();
            assert_eq!(path.path(), Some(flow.switch_ids(&t)), "flow {f}");
            let sk = rec.sketches(lat_q).unwrap();
            for hop in 1..=k {
                let m = sk.quantile(hop, 0.5).unwrap();
                let truth = 2000.0 * hop as f64;
                assert!(
                    (m - truth).abs() / truth < 0.1,
                    "flow {f} hop {hop}: median {m} vs {truth}"
                );
            }
            let u = rec.aggregate(util_q).unwrap();
            assert!(
                u.count > 100 && u.count < 280,
                "utilization on about 1/16 of 3000 packets: {}",
                u.count
            );
            assert!(
                (u.mean - 0.9).abs() < 0.03,
                "bottleneck utilization {}",
                u.mean
            );
        }
    }
}
