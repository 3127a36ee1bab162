//! A FlowRadar network simulation: a K-ary fat tree with hosts, flows between random hosts
//! routed by ECMP (a flow hash picks among equal-cost uplinks), packets lost on chosen links,
//! and one flowset per switch per epoch. Tests and `pint-bench flowradar` use it.

use std::collections::HashMap;

use crate::flowradar::flowset::{FlowSet, FlowSetConfig, seed_for_switch};
use crate::flowradar::key::FlowKey;
use crate::hash::hash32;
use crate::sim_rng::SimRng;
use crate::topology::Topology;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Fat-tree arity K (even).
    pub k: u32,
    /// Flows in the epoch.
    pub flows: u32,
    /// Each switch's table is sized for this many flows (None: the busiest switch's count).
    pub provisioned_flows: Option<u32>,
    /// Counting-table cells per provisioned flow.
    pub cells_per_flow: f64,
    /// Sub-tables per flowset.
    pub hashes: u8,
    /// Flow-filter bits per provisioned flow.
    pub filter_bits_per_flow: f64,
    /// Largest packets per flow (uniform from 1).
    pub max_packets: u32,
    /// Links (node numbers, direction `from -> to`) that drop packets, with the drop rate.
    pub lossy_links: Vec<((u32, u32), f64)>,
    /// Seed.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            k: 8,
            flows: 10_000,
            provisioned_flows: None,
            cells_per_flow: 1.3,
            hashes: 3,
            filter_bits_per_flow: crate::flowradar::flowset::DEFAULT_FILTER_BITS,
            max_packets: 20,
            lossy_links: Vec::new(),
            seed: 1,
        }
    }
}

/// The simulated epoch: flowsets and the truth.
#[derive(Debug, Clone)]
pub struct SimEpoch {
    /// The topology (switch index = node number).
    pub topology: Topology,
    /// One flowset per switch.
    pub flowsets: Vec<FlowSet>,
    /// Per switch, every flow it counted with its true (packets, bytes).
    pub truth: Vec<HashMap<FlowKey, (u64, u64)>>,
    /// Each flow's path (switch indices).
    pub paths: HashMap<FlowKey, Vec<usize>>,
    /// True packets lost per link (from, to).
    pub lost: HashMap<(usize, usize), u64>,
}

impl SimEpoch {
    /// Flows each switch sees.
    pub fn flows_per_switch(&self) -> Vec<usize> {
        self.truth.iter().map(HashMap::len).collect()
    }
}

/// The host's address: 10.pod.edge.host+2.
fn host_addr(k: u32, h: u32) -> u32 {
    let per_edge = k / 2;
    let edge = h / per_edge;
    let pod = edge / (k / 2);
    0x0a00_0000 | (pod << 16) | ((edge % (k / 2)) << 8) | (h % per_edge + 2)
}

/// ECMP path between hosts `a` and `b` for flow hash `fh`, as node numbers.
fn route(k: u32, a: u32, b: u32, fh: u32) -> Vec<u32> {
    let half = k / 2;
    let cores = half * half;
    let (ea, eb) = (a / half, b / half);
    let (pa, pb) = (ea / half, eb / half);
    let edge = |pod: u32, i: u32| cores + pod * k + half + i;
    let agg = |pod: u32, i: u32| cores + pod * k + i;
    let (src, dst) = (edge(pa, ea % half), edge(pb, eb % half));
    if ea == eb {
        return vec![src];
    }
    let up = fh % half;
    if pa == pb {
        return vec![src, agg(pa, up), dst];
    }
    let core = up * half + (fh / half) % half;
    vec![src, agg(pa, up), core, agg(pb, up), dst]
}

/// Simulates one epoch.
pub fn simulate(cfg: &SimConfig) -> SimEpoch {
    let topology = Topology::fat_tree(cfg.k);
    let hosts = cfg.k * cfg.k * cfg.k / 4;
    let n = topology.len();
    let mut rng = SimRng::new(cfg.seed);
    let mut truth: Vec<HashMap<FlowKey, (u64, u64)>> = vec![HashMap::new(); n];
    let mut paths = HashMap::new();
    let mut lost: HashMap<(usize, usize), u64> = HashMap::new();
    let loss: HashMap<(u32, u32), f64> = cfg.lossy_links.iter().copied().collect();
    // Packets as (switch, key, bytes) in arrival order, to feed the flowsets afterwards.
    let mut events: Vec<(usize, FlowKey, u32)> = Vec::new();
    for f in 0..cfg.flows {
        let a = rng.below(u64::from(hosts)) as u32;
        let mut b = rng.below(u64::from(hosts)) as u32;
        if b == a {
            b = (a + 1) % hosts;
        }
        let key = FlowKey {
            src: host_addr(cfg.k, a),
            dst: host_addr(cfg.k, b),
            src_port: 1024 + (f % 60_000) as u16,
            dst_port: [80, 443, 53, 8080][(f % 4) as usize],
            protocol: if f % 5 == 0 { 17 } else { 6 },
        };
        let path = route(cfg.k, a, b, hash32(0xec3d, &key.words()));
        paths.insert(key, path.iter().map(|&p| p as usize).collect());
        let packets = 1 + rng.below(u64::from(cfg.max_packets)) as u32;
        for _ in 0..packets {
            let bytes = 64 + rng.below(1437) as u32;
            for (i, &node) in path.iter().enumerate() {
                if i > 0 {
                    let link = (path[i - 1], node);
                    if let Some(&p) = loss.get(&link)
                        && rng.unit() < p
                    {
                        *lost.entry((link.0 as usize, link.1 as usize)).or_default() += 1;
                        break;
                    }
                }
                let e = truth[node as usize].entry(key).or_default();
                e.0 += 1;
                e.1 += u64::from(bytes);
                events.push((node as usize, key, bytes));
            }
        }
    }
    let provisioned = cfg
        .provisioned_flows
        .unwrap_or_else(|| truth.iter().map(HashMap::len).max().unwrap_or(1) as u32);
    let mut flowsets: Vec<FlowSet> = (0..n)
        .map(|s| {
            FlowSet::new(&FlowSetConfig {
                expected_flows: provisioned.max(1),
                cells_per_flow: cfg.cells_per_flow,
                hashes: cfg.hashes,
                filter_bits_per_flow: cfg.filter_bits_per_flow,
                seed: seed_for_switch(s as u32 + 1) ^ cfg.seed,
            })
        })
        .collect();
    for (s, key, bytes) in events {
        flowsets[s].update(&key, bytes);
    }
    SimEpoch {
        topology,
        flowsets,
        truth,
        paths,
        lost,
    }
}
