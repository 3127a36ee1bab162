//! A fabric of switches in one process, without DPDK: every switch runs the real pipeline
//! ([`Pipeline`], with the telemetry stages) over real frame bytes, and the emulator carries
//! each frame from an egress port to the neighbour's ingress port until it leaves through an
//! edge port. Time is simulated in nanoseconds: each hop takes the time the caller says, so
//! hop latencies are known exactly. Tests and accuracy experiments use it; its switches are
//! the switch's own code, not a model of it.

use std::sync::Arc;

use telemetry::flowradar::FlowSetConfig;
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;

use crate::burst::{BurstVerdicts, DROPPED, Pipeline};
use crate::clock::{Clock, SharedClock};
use crate::counters::{DropReason, LocalCounters};
use crate::digest::{DigestDrain, DigestRecord, ProbeRecord, digest_ring};
use crate::epochs::{ClosedFlowset, EpochCollector, worker_epochs};
use crate::fabric::{self, FabricError};
use crate::forward::Forwarder;
use crate::frame::{PacketBuf, VecFrame};
use crate::inband::{Inband, InbandSetup};
use crate::load::{LoadParams, PortLoads, SharedLoad};
use crate::plans::PlanCell;
use crate::tables::Tables;

/// How the emulated switches are set up.
#[derive(Debug, Clone)]
pub struct EmulatorConfig {
    /// The query file every switch runs (None: telemetry on, no plan).
    pub plan: Option<String>,
    /// FlowRadar sizing: flows expected per epoch.
    pub expected_flows: u32,
    /// FlowRadar epoch length in ns.
    pub epoch_ns: u64,
    /// Port capacity in bit/s.
    pub capacity_bps: u64,
    /// The edge ports' MTU.
    pub mtu: u16,
    /// The fabric ports' MTU (None: the edge ports' with room for the longest shim,
    /// [`fabric::Mtus::with_shim_room`]).
    pub fabric_mtu: Option<u16>,
    /// HPCC's base RTT in ns.
    pub base_rtt_ns: u64,
    /// Digest ring size per switch.
    pub ring: usize,
    /// The shim's EtherType.
    pub shim_ethertype: u16,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            plan: None,
            expected_flows: 1000,
            epoch_ns: 10_000_000,
            capacity_bps: 10_000_000_000,
            mtu: 1500,
            fabric_mtu: None,
            base_rtt_ns: 13_000,
            ring: 1 << 16,
            shim_ethertype: telemetry::wire::shim::DEFAULT_ETHERTYPE,
        }
    }
}

/// One emulated switch.
pub struct Node {
    /// The switch's tables.
    pub tables: Tables,
    /// Its pipeline (one worker).
    pub pipeline: Pipeline,
    digests: DigestDrain,
    epochs: EpochCollector,
    /// Where its plan comes from (install a new one for a hot reload).
    pub plans: Arc<PlanCell>,
}

/// What became of a frame sent into the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It left switch `node` through its edge port, as `frame`, after visiting `path`.
    Delivered {
        /// The last switch.
        node: u32,
        /// The frame the hosts receive.
        frame: Vec<u8>,
        /// The switches it crossed, first to last (node numbers).
        path: Vec<u32>,
    },
    /// It was lost on the link from switch `after` to switch `to` (see
    /// [`Emulator::send_lossy`]), after visiting `path`.
    Lost {
        /// The last switch it crossed.
        after: u32,
        /// The switch it was on its way to.
        to: u32,
        /// The switches it crossed, first to last.
        path: Vec<u32>,
    },
    /// Switch `node` dropped it.
    Dropped {
        /// The switch.
        node: u32,
        /// Why.
        reason: DropReason,
    },
}

/// The emulated fabric.
pub struct Emulator {
    /// The topology.
    pub topology: Topology,
    /// The switches, by node number.
    pub nodes: Vec<Node>,
    /// Simulated time, ns (also the switches' counter value).
    pub now_ns: u64,
    /// The config.
    pub config: EmulatorConfig,
}

impl Emulator {
    /// A fabric of `topology`'s switches, each with an edge port and routes from
    /// [`fabric::tables`]; switch IDs are the topology's.
    pub fn new(topology: Topology, config: EmulatorConfig) -> Result<Emulator, FabricError> {
        let clock = SharedClock::fixed(Clock::nanoseconds(0));
        let mut nodes = Vec::with_capacity(topology.len());
        for n in 0..topology.len() as u32 {
            let mut mtu = fabric::Mtus::with_shim_room(config.mtu);
            if let Some(m) = config.fabric_mtu {
                mtu.fabric = m;
            }
            let tables = fabric::tables(&topology, n, config.capacity_bps, mtu, 7)?;
            let switch_id = topology.switch_id(n);
            let plan = config.plan.as_deref().map(|text| {
                Arc::new(
                    SwitchPlan::compile(text, switch_id).expect("the emulator's plan compiles"),
                )
            });
            let plans = Arc::new(PlanCell::new(plan));
            let (producer, digests) = digest_ring(config.ring);
            let fs = FlowSetConfig::for_flows(config.expected_flows, switch_id);
            let (worker, epochs) = worker_epochs(0, &fs, 3, config.epoch_ns, &clock.get(), 0);
            let params: Vec<LoadParams> = tables
                .ports
                .iter()
                .map(|p| LoadParams::new(p.capacity_bps, config.base_rtt_ns))
                .collect();
            let inband = Inband::new(
                &tables.ports,
                InbandSetup {
                    switch_id,
                    shim_ethertype: config.shim_ethertype,
                    plans: Arc::clone(&plans),
                    clock: Arc::clone(&clock),
                    epochs: worker,
                    digests: producer,
                    loads: PortLoads::new(&params),
                    shared_load: Arc::new(SharedLoad::default()),
                },
            );
            let fwd = Arc::new(Forwarder::new(&tables).expect("generated routes are valid"));
            nodes.push(Node {
                pipeline: Pipeline::new(fwd, false).with_inband(inband),
                tables,
                digests,
                epochs,
                plans,
            });
        }
        Ok(Emulator {
            topology,
            nodes,
            now_ns: 0,
            config,
        })
    }

    /// Sends `frame` from the hosts of node `src` into the fabric at the current time; each
    /// switch `n` holds it `hop_ns(n)` ns. Time advances by the sum.
    pub fn send(&mut self, src: u32, frame: &[u8], hop_ns: impl FnMut(u32) -> u64) -> Outcome {
        self.send_lossy(src, frame, hop_ns, |_, _| false)
    }

    /// As [`Emulator::send`], with links that lose frames: `lose(from, to)` says whether the
    /// frame is lost on its way from switch `from` to switch `to` (node numbers).
    pub fn send_lossy(
        &mut self,
        src: u32,
        frame: &[u8],
        mut hop_ns: impl FnMut(u32) -> u64,
        mut lose: impl FnMut(u32, u32) -> bool,
    ) -> Outcome {
        let mut node = src;
        let mut port = 0usize;
        let mut pkt = [VecFrame::new(frame)];
        let mut path = Vec::new();
        let mut verdicts = BurstVerdicts::default();
        loop {
            path.push(node);
            let rx = self.now_ns;
            let tx = rx + hop_ns(node);
            let p = &mut self.nodes[node as usize].pipeline;
            p.tick(rx);
            p.process_burst(port, &mut pkt, rx, || tx, &mut verdicts);
            self.now_ns = tx;
            let v = verdicts.verdicts[0];
            if v & DROPPED != 0 {
                let reason = DropReason::ALL[usize::from(v & !DROPPED)];
                return Outcome::Dropped { node, reason };
            }
            let egress = usize::from(v);
            if egress == 0 {
                return Outcome::Delivered {
                    node,
                    frame: pkt[0].data().to_vec(),
                    path,
                };
            }
            let next = self.topology.neighbours(node)[egress - 1];
            if lose(node, next) {
                return Outcome::Lost {
                    after: node,
                    to: next,
                    path,
                };
            }
            port =
                usize::from(fabric::port_towards(&self.topology, next, node).expect("symmetric"));
            node = next;
        }
    }

    /// Moves time forward to `ns`, letting every switch end its epochs.
    pub fn advance_to(&mut self, ns: u64) {
        self.now_ns = self.now_ns.max(ns);
        for n in &mut self.nodes {
            n.pipeline.tick(self.now_ns);
        }
    }

    /// The digest records node `n` reported since the last call.
    pub fn digests(&mut self, n: u32) -> Vec<DigestRecord> {
        self.nodes[n as usize].digests.records()
    }

    /// The probe records node `n` reported since the last call.
    pub fn probes(&mut self, n: u32) -> Vec<ProbeRecord> {
        self.nodes[n as usize].digests.probe_records()
    }

    /// The flowsets node `n` finished since the last call (each is returned to the switch
    /// cleared once taken, as the control thread does).
    pub fn flowsets(&mut self, n: u32) -> Vec<ClosedFlowset> {
        let e = &self.nodes[n as usize].epochs;
        let mut out = Vec::new();
        while let Some(c) = e.try_recv() {
            out.push(c.detached());
            e.give_back(c);
        }
        out
    }

    /// Node `n`'s counters.
    pub fn counters(&self, n: u32) -> &LocalCounters {
        &self.nodes[n as usize].pipeline.counters
    }
}
