//! The export thread: per-flow records from the decode threads go to the IPFIX collector and
//! to the JSON-lines file (one JSON object per record per line).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::flows::FlowExport;
use crate::ipfix::IpfixExporter;

/// Counters of the export thread.
#[derive(Debug, Default)]
pub struct ExportCounters {
    /// Records written as JSON lines.
    pub json_records: AtomicU64,
    /// Records sent over IPFIX.
    pub ipfix_records: AtomicU64,
    /// IPFIX messages sent.
    pub ipfix_messages: AtomicU64,
    /// IPFIX messages the socket refused (their records are lost).
    pub ipfix_errors: AtomicU64,
    /// JSON lines not written, and flushes of the file that failed.
    pub json_errors: AtomicU64,
}

/// Where records go.
pub struct Outputs {
    ipfix: Option<IpfixExporter>,
    json: Option<BufWriter<File>>,
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
            Some(p) => {
                // Appended to: a restart keeps what was written, and tools that follow the
                // file see it grow, never shrink.
                Some(BufWriter::new(
                    File::options()
                        .create(true)
                        .append(true)
                        .open(p)
                        .map_err(|e| anyhow::anyhow!("--json-lines {}: {e}", p.display()))?,
                ))
            }
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
            let ok = serde_json::to_writer(&mut *j, &r).is_ok() && j.write_all(b"\n").is_ok();
            if ok {
                self.counters.json_records.fetch_add(1, Relaxed);
            } else {
                self.counters.json_errors.fetch_add(1, Relaxed);
            }
        }
    }

    fn flush(&mut self) {
        if let Some(x) = &mut self.ipfix {
            x.flush();
            self.counters.ipfix_records.store(x.records, Relaxed);
            self.counters.ipfix_messages.store(x.messages, Relaxed);
            self.counters.ipfix_errors.store(x.errors, Relaxed);
        }
        if let Some(j) = &mut self.json
            && j.flush().is_err()
        {
            self.counters.json_errors.fetch_add(1, Relaxed);
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
