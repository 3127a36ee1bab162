//! The hello, plan, flowset and stats frames (digest batches are in `digests.rs`).

use crate::flowradar::wire::{self, EpochFlowSet, Shape};
use crate::wire::MacAddr;
use crate::wire::bytes::Reader;

use super::{
    MAX_BATCH, MAX_EPOCH_NS, MAX_EPOCHS, MAX_PLAN_TEXT, MAX_PORTS, MAX_STATS, MAX_WORKERS,
    ProtocolError,
};

/// A plan in force at the switch: its version, digest length and query file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanText {
    /// The plan version (the compiled plan's fingerprint).
    pub version: u32,
    /// Digest bytes of the plan.
    pub digest_bytes: u8,
    /// The query file (TOML); the sink compiles it and checks the version.
    pub text: String,
}

impl PlanText {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.version.to_be_bytes());
        out.push(self.digest_bytes);
        out.extend_from_slice(&(self.text.len() as u32).to_be_bytes());
        out.extend_from_slice(self.text.as_bytes());
    }

    pub(crate) fn decode(r: &mut Reader<'_>, whole: bool) -> Result<PlanText, ProtocolError> {
        let version = r.u32()?;
        let digest_bytes = r.u8()?;
        if !(1..=8).contains(&digest_bytes) {
            return Err(ProtocolError::BadField("digest bytes"));
        }
        let len = r.u32()? as usize;
        if len > MAX_PLAN_TEXT {
            return Err(ProtocolError::OverLimit("plan text"));
        }
        let text = std::str::from_utf8(r.take(len)?)
            .map_err(|_| ProtocolError::NotUtf8("plan text"))?
            .to_owned();
        if whole && r.remaining() != 0 {
            return Err(ProtocolError::TrailingBytes);
        }
        Ok(PlanText {
            version,
            digest_bytes,
            text,
        })
    }

    /// The plan frame's payload.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.text.len());
        self.encode(&mut out);
        out
    }
}

/// One port of the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// The port's name in the switch's configuration.
    pub name: String,
    /// Whether hosts sit behind it.
    pub edge: bool,
    /// Line rate, bit/s.
    pub capacity_bps: u64,
    /// Its MAC.
    pub mac: MacAddr,
}

/// What a switch declares when it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The switch's ID.
    pub switch_id: u32,
    /// Random per switch process: a new value means the switch restarted.
    pub session: u64,
    /// FlowRadar epoch length, ns.
    pub epoch_ns: u64,
    /// The shim's EtherType.
    pub shim_ethertype: u16,
    /// The flowsets' shape (the same for every worker).
    pub shape: Shape,
    /// The flow filters' seed.
    pub filter_seed: u64,
    /// Each worker's counting-table seed (one flowset per worker per epoch).
    pub table_seeds: Vec<u64>,
    /// Most digests the switch puts in one batch.
    pub max_digests: u32,
    /// The ports, by index.
    pub ports: Vec<PortInfo>,
    /// The plan in force, if any.
    pub plan: Option<PlanText>,
}

impl Hello {
    /// The hello frame's payload. The switch's configuration keeps it within the decoder's
    /// limits (workers, ports, port names of at most 255 bytes).
    pub fn payload(&self) -> Vec<u8> {
        debug_assert!((1..=MAX_WORKERS).contains(&self.table_seeds.len()));
        debug_assert!(self.ports.len() <= MAX_PORTS);
        debug_assert!(self.ports.iter().all(|p| p.name.len() <= 255));
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&self.switch_id.to_be_bytes());
        out.extend_from_slice(&self.session.to_be_bytes());
        out.extend_from_slice(&self.epoch_ns.to_be_bytes());
        out.extend_from_slice(&self.shim_ethertype.to_be_bytes());
        out.extend_from_slice(&(self.table_seeds.len() as u16).to_be_bytes());
        out.push(self.shape.hashes);
        out.push(0);
        out.extend_from_slice(&self.shape.cells_per_table.to_be_bytes());
        out.extend_from_slice(&self.shape.filter_blocks.to_be_bytes());
        out.extend_from_slice(&self.filter_seed.to_be_bytes());
        for s in &self.table_seeds {
            out.extend_from_slice(&s.to_be_bytes());
        }
        out.extend_from_slice(&self.max_digests.to_be_bytes());
        out.push(self.ports.len() as u8);
        for p in &self.ports {
            out.push(u8::from(!p.edge));
            out.extend_from_slice(&p.capacity_bps.to_be_bytes());
            out.extend_from_slice(&p.mac.0);
            out.push(p.name.len() as u8);
            out.extend_from_slice(p.name.as_bytes());
        }
        match &self.plan {
            Some(p) => {
                out.push(1);
                p.encode(&mut out);
            }
            None => out.push(0),
        }
        out
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<Hello, ProtocolError> {
        let mut r = Reader::new(payload);
        let switch_id = r.u32()?;
        if switch_id == 0 {
            return Err(ProtocolError::BadField("switch id"));
        }
        let session = r.u64()?;
        let epoch_ns = r.u64()?;
        // A switch's epochs are 1 ms to 1 min (`telemetry.epoch_ms`); anything else would
        // overflow the sink's epoch arithmetic.
        if !(1_000_000..=MAX_EPOCH_NS).contains(&epoch_ns) {
            return Err(ProtocolError::BadField("epoch length"));
        }
        let shim_ethertype = r.u16()?;
        let workers = usize::from(r.u16()?);
        if workers == 0 || workers > MAX_WORKERS {
            return Err(ProtocolError::OverLimit("workers"));
        }
        let hashes = r.u8()?;
        if !(1..=crate::flowradar::flowset::MAX_HASHES).contains(&hashes) {
            return Err(ProtocolError::BadField("sub-tables"));
        }
        if r.u8()? != 0 {
            return Err(ProtocolError::BadField("reserved"));
        }
        let cells_per_table = r.u32()?;
        if cells_per_table == 0 || cells_per_table as usize * usize::from(hashes) > wire::MAX_CELLS
        {
            return Err(ProtocolError::OverLimit("flowset cells"));
        }
        let filter_blocks = r.u32()?;
        if filter_blocks == 0 || filter_blocks as usize > wire::MAX_FILTER_BLOCKS {
            return Err(ProtocolError::OverLimit("filter blocks"));
        }
        let filter_seed = r.u64()?;
        let mut table_seeds = Vec::with_capacity(workers);
        for _ in 0..workers {
            table_seeds.push(r.u64()?);
        }
        let max_digests = r.u32()?;
        if max_digests == 0 || max_digests > MAX_BATCH {
            return Err(ProtocolError::OverLimit("digests per batch"));
        }
        let nports = usize::from(r.u8()?);
        if nports > MAX_PORTS {
            return Err(ProtocolError::OverLimit("ports"));
        }
        let mut ports = Vec::with_capacity(nports);
        for _ in 0..nports {
            let role = r.u8()?;
            if role > 1 {
                return Err(ProtocolError::BadField("port role"));
            }
            let capacity_bps = r.u64()?;
            let mac = MacAddr(r.take(6)?.try_into().expect("6 bytes"));
            let len = usize::from(r.u8()?);
            let name = std::str::from_utf8(r.take(len)?)
                .map_err(|_| ProtocolError::NotUtf8("port name"))?
                .to_owned();
            ports.push(PortInfo {
                name,
                edge: role == 0,
                capacity_bps,
                mac,
            });
        }
        let plan = match r.u8()? {
            0 => None,
            1 => Some(PlanText::decode(&mut r, false)?),
            _ => return Err(ProtocolError::BadField("plan present")),
        };
        if r.remaining() != 0 {
            return Err(ProtocolError::TrailingBytes);
        }
        Ok(Hello {
            switch_id,
            session,
            epoch_ns,
            shim_ethertype,
            shape: Shape {
                hashes,
                cells_per_table,
                filter_blocks,
            },
            filter_seed,
            table_seeds,
            max_digests,
            ports,
            plan,
        })
    }
}

/// One worker's flowset of an epoch (or of several, when the worker was late).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSetFrame {
    /// The worker.
    pub worker: u16,
    /// Epochs the flowset covers, from its epoch number on.
    pub epochs: u32,
    /// The flowset, its switch and first epoch.
    pub flowset: EpochFlowSet,
}

/// The flowset frame's payload: flowset `fs` of switch `switch_id`'s worker `worker`, from
/// epoch `epoch` on, covering `epochs` epochs.
pub fn encode_flowset(
    worker: u16,
    epochs: u32,
    switch_id: u32,
    epoch: u64,
    fs: &crate::flowradar::FlowSet,
) -> Vec<u8> {
    let body = wire::encode_parts(switch_id, epoch, fs);
    let mut out = Vec::with_capacity(6 + body.len());
    out.extend_from_slice(&worker.to_be_bytes());
    out.extend_from_slice(&epochs.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

impl FlowSetFrame {
    pub(crate) fn decode(payload: &[u8], hello: &Hello) -> Result<FlowSetFrame, ProtocolError> {
        let (worker, epochs, at) = Self::head(payload, hello)?;
        let flowset = wire::decode_shaped(&payload[at..], Some(hello.shape))?;
        Self::check_ids(
            hello,
            worker,
            flowset.switch_id,
            flowset.flowset.table_seed(),
            flowset.flowset.filter().seed(),
        )?;
        Ok(FlowSetFrame {
            worker,
            epochs,
            flowset,
        })
    }

    /// Checks a payload as [`FlowSetFrame::decode`] would, without allocating its table.
    pub(crate) fn check(payload: &[u8], hello: &Hello) -> Result<(), ProtocolError> {
        let (worker, _, at) = Self::head(payload, hello)?;
        let h = wire::check_shaped(&payload[at..], Some(hello.shape))?;
        Self::check_ids(hello, worker, h.switch_id, h.table_seed, h.filter_seed)
    }

    /// The worker and epoch count, and where the flowset starts.
    fn head(payload: &[u8], hello: &Hello) -> Result<(u16, u32, usize), ProtocolError> {
        let mut r = Reader::new(payload);
        let worker = r.u16()?;
        if usize::from(worker) >= hello.table_seeds.len() {
            return Err(ProtocolError::BadField("worker"));
        }
        let epochs = r.u32()?;
        if epochs == 0 || epochs > MAX_EPOCHS {
            return Err(ProtocolError::BadField("epochs"));
        }
        Ok((worker, epochs, r.position()))
    }

    /// The flowset's switch and seeds must be the ones the hello declared for `worker`.
    fn check_ids(
        hello: &Hello,
        worker: u16,
        switch_id: u32,
        table_seed: u64,
        filter_seed: u64,
    ) -> Result<(), ProtocolError> {
        if switch_id != hello.switch_id {
            return Err(ProtocolError::BadField("flowset switch id"));
        }
        if table_seed != hello.table_seeds[usize::from(worker)] || filter_seed != hello.filter_seed
        {
            return Err(ProtocolError::BadField("flowset seeds"));
        }
        Ok(())
    }
}

/// A switch's counters by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// (name, value) pairs.
    pub counters: Vec<(String, u64)>,
}

impl Stats {
    /// The stats frame's payload (names longer than 64 bytes are cut, empty ones left out:
    /// the decoder refuses them).
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.counters.len() * 40);
        let named = || self.counters.iter().filter(|(name, _)| !name.is_empty());
        let n = named().count().min(MAX_STATS);
        out.extend_from_slice(&(n as u16).to_be_bytes());
        for (name, v) in named().take(n) {
            let mut end = name.len().min(64);
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            out.push(end as u8);
            out.extend_from_slice(&name.as_bytes()[..end]);
            out.extend_from_slice(&v.to_be_bytes());
        }
        out
    }

    pub(crate) fn decode(payload: &[u8]) -> Result<Stats, ProtocolError> {
        let mut r = Reader::new(payload);
        let n = usize::from(r.u16()?);
        if n > MAX_STATS {
            return Err(ProtocolError::OverLimit("counters"));
        }
        let mut counters = Vec::with_capacity(n.min(r.remaining() / 9));
        for _ in 0..n {
            let len = usize::from(r.u8()?);
            if len == 0 || len > 64 {
                return Err(ProtocolError::BadField("counter name"));
            }
            let name = std::str::from_utf8(r.take(len)?)
                .map_err(|_| ProtocolError::NotUtf8("counter name"))?
                .to_owned();
            counters.push((name, r.u64()?));
        }
        if r.remaining() != 0 {
            return Err(ProtocolError::TrailingBytes);
        }
        Ok(Stats { counters })
    }
}
