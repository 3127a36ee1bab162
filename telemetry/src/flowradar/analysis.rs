//! Analyses over decoded counters: per-flow loss between consecutive hops, its sum per link
//! (which localises lossy links), and flows seen at one hop but not the next.

use std::collections::{BTreeMap, HashMap};

use crate::flowradar::key::FlowKey;
use crate::flowradar::network::NetworkResult;

/// Loss on one link (from switch index `from` to `to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkLoss {
    /// Upstream switch (index into the epoch's flowsets).
    pub from: usize,
    /// Downstream switch.
    pub to: usize,
    /// Packets counted upstream but not downstream.
    pub packets_lost: u64,
    /// Flows that lost packets here.
    pub flows_with_loss: u32,
    /// Flows whose counters at both ends are known.
    pub flows_measured: u32,
    /// Flows counted upstream and absent downstream (blackholed or looped away).
    pub flows_vanished: u32,
}

/// Per-link loss from each flow's counters along its path (`paths`: switch indices in order;
/// from the routing, or from PINT path tracing).
pub fn link_losses(result: &NetworkResult, paths: &HashMap<FlowKey, Vec<usize>>) -> Vec<LinkLoss> {
    let counts: Vec<HashMap<FlowKey, Option<u64>>> = result
        .switches
        .iter()
        .map(|s| s.flows.iter().map(|f| (f.key, f.packets)).collect())
        .collect();
    let mut links: BTreeMap<(usize, usize), LinkLoss> = BTreeMap::new();
    for (key, path) in paths {
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            let e = links.entry((a, b)).or_insert(LinkLoss {
                from: a,
                to: b,
                packets_lost: 0,
                flows_with_loss: 0,
                flows_measured: 0,
                flows_vanished: 0,
            });
            let up = counts.get(a).and_then(|m| m.get(key)).copied().flatten();
            // Absent downstream means lost only if that switch's flows are all accounted for.
            let down_known = result
                .switches
                .get(b)
                .is_some_and(|s| s.keys_complete && s.counters_complete);
            match (up, counts.get(b).and_then(|m| m.get(key)).copied()) {
                (Some(u), Some(Some(d))) => {
                    e.flows_measured += 1;
                    if u > d {
                        e.packets_lost += u - d;
                        e.flows_with_loss += 1;
                    }
                }
                (Some(u), None) if down_known && u > 0 => {
                    e.flows_vanished += 1;
                    e.packets_lost += u;
                }
                _ => {}
            }
        }
    }
    links.into_values().collect()
}
