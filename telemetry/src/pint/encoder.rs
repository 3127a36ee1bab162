//! A plan as one switch runs it: the compiled plan plus what the switch can work out once
//! for its own static values (the value keys of its switch ID and port numbers), so that the
//! per-packet work is the tape words and the table lookups.

use crate::pint::plan::{HopInput, Plan, QueryKind, ValueKeys};
use crate::pint::query::{QueryFile, ValueKind};
use crate::pint::tape;
use crate::wire::shim::digest_bytes;

/// Port numbers whose value keys are precomputed (larger ones are computed per packet).
pub const PRECOMPUTED_PORTS: usize = 64;

/// A compiled plan ready for one switch's data plane.
#[derive(Debug, Clone)]
pub struct SwitchPlan {
    /// The plan.
    pub plan: Plan,
    /// The query file it was compiled from (the sink compiles the same text).
    pub text: String,
    /// Per query: the value key of this switch's ID (static switch-ID queries; 0 otherwise).
    switch_keys: Vec<u64>,
    /// Per query: the value keys of port numbers (static port queries; empty otherwise).
    port_keys: Vec<Vec<u64>>,
}

impl SwitchPlan {
    /// Compiles `text` (a query file) for switch `switch_id`.
    pub fn compile(text: &str, switch_id: u32) -> Result<SwitchPlan, String> {
        let file = QueryFile::from_toml(text)?;
        let plan = Plan::compile(&file).map_err(|e| e.to_string())?;
        Ok(SwitchPlan::new(plan, text.to_owned(), switch_id))
    }

    /// Prepares `plan` (compiled from `text`) for switch `switch_id`.
    pub fn new(plan: Plan, text: String, switch_id: u32) -> SwitchPlan {
        let mut switch_keys = Vec::with_capacity(plan.queries.len());
        let mut port_keys = Vec::with_capacity(plan.queries.len());
        for q in &plan.queries {
            let salt = match &q.kind {
                QueryKind::StaticPerFlow { coding } => Some(coding.salt()),
                _ => None,
            };
            switch_keys.push(match (salt, q.value) {
                (Some(s), ValueKind::SwitchId) => tape::value_key(s, switch_id),
                _ => 0,
            });
            port_keys.push(match (salt, q.value) {
                (Some(s), ValueKind::IngressPort | ValueKind::EgressPort) => (0..PRECOMPUTED_PORTS)
                    .map(|p| tape::value_key(s, p as u32))
                    .collect(),
                _ => Vec::new(),
            });
        }
        SwitchPlan {
            plan,
            text,
            switch_keys,
            port_keys,
        }
    }

    /// The plan's version (what digest records and the sink use).
    pub fn version(&self) -> u32 {
        self.plan.version
    }

    /// The plan's tag in the shim: the version's low 16 bits.
    pub fn tag(&self) -> u16 {
        self.plan.version as u16
    }

    /// Bytes of the digest in the shim.
    pub fn digest_bytes(&self) -> usize {
        digest_bytes(self.plan.global_bits)
    }

    /// Updates a digest at one hop; `m` is the packet word ([`tape::packet_word`] of the packet
    /// ID) and `input` what the switch measured (its `switch_id` must be this plan's switch).
    #[inline(always)]
    pub fn encode(&self, digest: u64, m: u64, input: &HopInput) -> u64 {
        self.plan.encode_with(digest, m, input, self)
    }
}

impl ValueKeys for SwitchPlan {
    #[inline(always)]
    fn key(&self, query: usize, kind: ValueKind, salt: u64, value: u32) -> u64 {
        match kind {
            ValueKind::SwitchId => self.switch_keys[query],
            _ => match self.port_keys[query].get(value as usize) {
                Some(k) => *k,
                None => tape::value_key(salt, value),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hash64;

    #[test]
    fn switch_plan_encodes_exactly_as_the_plan() {
        let text = r#"
global_bits = 32
[[queries]]
name = "path"
value = "switch_id"
aggregation = "static_per_flow"
bits = 8
instances = 2
[[queries]]
name = "egress"
value = "egress_port"
aggregation = "static_per_flow"
bits = 4
frequency = 0.5
[[queries]]
name = "latency"
value = "hop_latency"
aggregation = "dynamic_per_flow"
bits = 8
frequency = 0.5
[[queries]]
name = "util"
value = "link_utilization"
aggregation = "max"
bits = 8
frequency = 0.5
"#;
        for switch_id in [1u32, 77, 0xdead_beef] {
            let sp = SwitchPlan::compile(text, switch_id).unwrap();
            for pid in 0..5000u32 {
                let r = hash64(9, &[u64::from(pid)]);
                let input = HopInput {
                    pid,
                    hop: 1 + (r % 12) as usize,
                    switch_id,
                    ingress_port: (r >> 8) as u32 % 70,
                    egress_port: (r >> 16) as u32 % 70,
                    hop_latency_ns: r >> 40,
                    queue_bytes: 0,
                    utilization: (r >> 50) + 1,
                };
                let d0 = r >> 32;
                assert_eq!(
                    sp.encode(d0, tape::packet_word(pid), &input),
                    sp.plan.encode(d0, &input),
                    "pid {pid}"
                );
            }
            assert_eq!(sp.digest_bytes(), 4);
            assert_eq!(sp.tag(), sp.version() as u16);
        }
    }
}
