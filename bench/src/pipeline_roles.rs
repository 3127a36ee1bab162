//! The pipeline in each telemetry role over frames in memory, as the pipeline benchmark
//! (`benches/pipeline.rs`) and the stage profiler (`examples/pipeline_stages.rs`) run it: a
//! three-switch line with the paper's plan and FlowRadar sized for the traffic, 10K flows of
//! 60-byte UDP frames as the role's switch receives them, bursts of 32, the switch's own code
//! without the DPDK drivers around it.

use std::net::Ipv4Addr;
use std::sync::Arc;

use pipeline::capture::{PacketSpec, with_shim};
use pipeline::emulator::{Emulator, EmulatorConfig};
use pipeline::fabric::{host_addr, port_mac};
use pipeline::{BurstVerdicts, Forwarder, Pipeline, VecFrame};
use telemetry::pint::encoder::SwitchPlan;
use telemetry::topology::Topology;

const PAPER: &str = include_str!("../../configs/queries/paper.toml");

/// Flows (and frames) in the traffic.
pub const FLOWS: u32 = 10_000;
/// Frames per burst.
pub const BURST: usize = 32;

/// What the switch under test does to the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Telemetry off: plain forwarding.
    Off,
    /// Edge in, fabric out: the shim inserted.
    Ingress,
    /// Fabric to fabric: the shim encoded in place.
    Transit,
    /// Fabric in, edge out: encoded, reported, stripped.
    Egress,
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "off" => Ok(Role::Off),
            "ingress" | "edge_ingress" => Ok(Role::Ingress),
            "transit" => Ok(Role::Transit),
            "egress" | "edge_egress" => Ok(Role::Egress),
            _ => Err(format!(
                "unknown role `{s}` (off, ingress, transit, egress)"
            )),
        }
    }
}

/// One role's switch and traffic.
pub struct RoleBench {
    role: Role,
    emu: Emulator,
    off: Pipeline,
    frames: Vec<Vec<u8>>,
    burst: Vec<VecFrame>,
}

impl RoleBench {
    /// The switch and traffic of `role`.
    pub fn new(role: Role) -> RoleBench {
        let plan = SwitchPlan::compile(PAPER, 1).expect("the paper's plan compiles");
        let emu = Emulator::new(
            Topology::line(3),
            EmulatorConfig {
                plan: Some(PAPER.to_owned()),
                expected_flows: FLOWS,
                ring: 1 << 16,
                ..Default::default()
            },
        )
        .expect("a line of three switches");
        let off = Pipeline::new(
            Arc::new(Forwarder::new(&emu.nodes[0].tables).expect("valid routes")),
            false,
        );
        let frames = match role {
            Role::Off | Role::Ingress => frames(0, 2, 0, 64, None),
            Role::Transit => frames(0, 2, 1, 63, Some(&plan)),
            Role::Egress => frames(0, 2, 2, 62, Some(&plan)),
        };
        RoleBench {
            role,
            emu,
            off,
            frames,
            burst: Vec::with_capacity(BURST),
        }
    }

    /// Runs every frame once through the role's switch, burst by burst (and, at the edge
    /// egress, takes the digest records off its ring as the control thread would).
    pub fn round(&mut self) {
        let (node, port) = match self.role {
            Role::Off | Role::Ingress => (0, 0),
            Role::Transit => (1, 1),
            Role::Egress => (2, 1),
        };
        let mut out = BurstVerdicts::default();
        for chunk in self.frames.chunks(BURST) {
            let p = match self.role {
                Role::Off => &mut self.off,
                _ => &mut self.emu.nodes[node].pipeline,
            };
            if self.burst.len() < chunk.len() {
                self.burst.resize(chunk.len(), VecFrame::new(&[]));
            }
            for (b, f) in self.burst.iter_mut().zip(chunk) {
                b.reset(f);
            }
            let n = chunk.len();
            p.process_burst(port, &mut self.burst[..n], 0, || 1_000, &mut out);
            std::hint::black_box(&out);
            if self.role == Role::Egress {
                std::hint::black_box(self.emu.digests(2).len());
            }
        }
    }
}

/// [`FLOWS`] 60-byte UDP frames from node `src`'s hosts to node `dst`'s, as node `at` receives
/// them (with TTL `ttl`, shimmed or not).
fn frames(src: u32, dst: u32, at: u32, ttl: u8, shim: Option<&SwitchPlan>) -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let mut p = PacketSpec::udp(
                Ipv4Addr::from(host_addr(src, 1) + (i >> 8)),
                Ipv4Addr::from(host_addr(dst, 1)),
                1024 + (i & 0xff) as u16,
                4791,
            );
            p.ttl = ttl;
            p.ident = i as u16;
            p.dst_mac = port_mac(at, 1);
            let f = p.build();
            match shim {
                Some(plan) => with_shim(&f, 0x88b5, plan.tag(), plan.digest_bytes(), 0),
                None => f,
            }
        })
        .collect()
}
