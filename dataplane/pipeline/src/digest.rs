//! What the last hop reports for each packet that leaves through an edge port: one digest
//! record, put on the worker's own ring for the control thread to batch and export. A full
//! ring drops the record and counts it; the worker never waits.

use telemetry::flowradar::FlowKey;
use telemetry::protocol::WireDigest;
use telemetry::wire::probe::ProbePayload;

/// One packet's telemetry as the last PINT hop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DigestRecord {
    /// The flow.
    pub key: FlowKey,
    /// The packet ID.
    pub pid: u32,
    /// The full version of the plan the digest was encoded with.
    pub plan_version: u32,
    /// The digest (right-aligned).
    pub digest: u64,
    /// Counter value when the packet left (the control thread converts it to Unix time).
    pub tsc: u64,
    /// Path length `k`: this hop's index.
    pub hops: u8,
    /// The port the packet arrived on at this switch.
    pub ingress_port: u8,
    /// The edge port it left by.
    pub egress_port: u8,
    /// The probe it carried, if it was one (`telemetry::wire::probe`): the sink measures
    /// the probe stream's loss, reordering and one-way delay from these.
    pub probe: Option<ProbePayload>,
}

impl DigestRecord {
    /// The record as it travels to the sink, with its time converted to Unix ns.
    pub fn to_wire(&self, time_ns: u64) -> WireDigest {
        WireDigest {
            key: self.key,
            ingress_port: self.ingress_port,
            egress_port: self.egress_port,
            pid: self.pid,
            hops: self.hops,
            plan_version: self.plan_version,
            digest: self.digest,
            time_ns,
        }
    }
}

/// The worker's end of its digest ring.
pub type DigestProducer = rtrb::Producer<DigestRecord>;
/// The control thread's end of a worker's digest ring.
pub type DigestConsumer = rtrb::Consumer<DigestRecord>;

/// A ring of `capacity` records: (worker end, control end).
pub fn digest_ring(capacity: usize) -> (DigestProducer, DigestConsumer) {
    rtrb::RingBuffer::new(capacity.max(1))
}
