//! The export thread: per-flow records from the decode threads go to the IPFIX collector and
//! to the JSON-lines file (one JSON object per record per line).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::flows::FlowExport;
use crate::ipfix::IpfixExporter;
use crate::lines::{LineFile, Reopen};

/// Counters of the export thread.
#[derive(Debug, Default)]
pub struct ExportCounters {
    /// Records written as JSON lines (a flush took them).
    pub json_records: AtomicU64,
    /// Records sent over IPFIX.
    pub ipfix_records: AtomicU64,
    /// IPFIX messages sent.
    pub ipfix_messages: AtomicU64,
    /// IPFIX messages the socket refused (their records are lost).
    pub ipfix_errors: AtomicU64,
    /// Records lost on their way to the JSON lines file (a write or a flush failed).
    pub json_errors: AtomicU64,
}

/// Where records go.
pub struct Outputs {
    ipfix: Option<IpfixExporter>,
    json: Option<LineFile>,
    counters: Arc<ExportCounters>,
}

impl Outputs {
    /// Opens the outputs; an error names which.
    pub fn open(
        ipfix: Option<SocketAddr>,
        template_interval: Duration,
        ipfix_rate: u32,
        ipfix_message_bytes: usize,
        json_lines: Option<&Path>,
        reopen: Reopen,
        counters: Arc<ExportCounters>,
    ) -> anyhow::Result<Outputs> {
        let ipfix = match ipfix {
            Some(a) => Some(
                IpfixExporter::new(a, template_interval)
                    .map_err(|e| anyhow::anyhow!("--ipfix {a}: {e}"))?
                    .with_rate(ipfix_rate)
                    .with_max_message(ipfix_message_bytes),
            ),
            None => None,
        };
        let json = match json_lines {
            Some(p) => Some(LineFile::open("--json-lines", p, reopen)?),
            None => None,
        };
        Ok(Outputs {
            ipfix,
            json,
            counters,
        })
    }

    /// Whether there is anywhere to send records.
    pub fn any(&self) -> bool {
        self.ipfix.is_some() || self.json.is_some()
    }

    fn add(&mut self, r: FlowExport) {
        // A flow's end with nothing new (its last packets went in an active-timeout record)
        // is a JSON line only: collectors count each IPFIX record as a flow.
        if let Some(x) = &mut self.ipfix
            && r.packets > 0
        {
            x.add(r);
        }
        if let Some(j) = &mut self.json {
            j.push(&r);
        }
    }

    fn flush(&mut self) {
        if let Some(x) = &mut self.ipfix {
            x.flush();
            self.counters.ipfix_records.store(x.records, Relaxed);
            self.counters.ipfix_messages.store(x.messages, Relaxed);
            self.counters.ipfix_errors.store(x.errors, Relaxed);
        }
        if let Some(j) = &mut self.json {
            j.flush();
            let c = j.counts();
            self.counters
                .json_records
                .store(c.written.load(Relaxed), Relaxed);
            self.counters
                .json_errors
                .store(c.lost.load(Relaxed), Relaxed);
        }
    }

    /// Runs until `rx` closes.
    pub fn run(mut self, rx: Receiver<FlowExport>) {
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(r) => {
                    self.add(r);
                    while let Ok(r) = rx.try_recv() {
                        self.add(r);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.flush();
        }
        self.flush();
    }
}
