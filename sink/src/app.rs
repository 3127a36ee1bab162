//! The sink assembled: ingest, decode threads, the epoch assembler, the export thread and the
//! HTTP server, started together and stopped in order: ingest first, so that nothing is
//! decoded half-way; then the decode threads, each exporting what it holds; then the event
//! lines, the export thread and the HTTP server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{SendTimeoutError, bounded};
use telemetry::topology::Topology;

use crate::config::SinkConfig;
use crate::detect::Params;
use crate::epochs::{self, EpochLog, HeldTotals};
use crate::events::EventLog;
use crate::export::{ExportCounters, Outputs};
use crate::flows::{FlowTable, ShardContext};
use crate::ingest::{self, Ingest};
use crate::lines::LineFile;
use crate::registry::Registry;
use crate::shard::{self, Buffers, Shard, ShardMsg, Timeouts, shard_of};
use crate::transport::TcpTransport;

/// Digest buffers a decode thread keeps for the connections to reuse (each up to one batch:
/// at most the hello's `max_digests`, itself at most 65536, of 40 bytes each).
const BUFFERS_PER_SHARD: usize = 32;
/// Flowsets waiting for the epoch assembler, at most (beyond, new ones are dropped,
/// counted).
const FLOWSET_QUEUE: usize = 1 << 16;
/// Records waiting for the export thread before new ones are dropped.
const EXPORT_QUEUE: usize = 1 << 16;

/// Everything the API and the metrics read.
pub struct Shared {
    /// Switches, plans, owners.
    pub registry: Arc<Registry>,
    /// Decode threads.
    pub shards: Vec<Shard>,
    /// Epoch reports and counters.
    pub epochs: Arc<EpochLog>,
    /// Export counters.
    pub exports: Arc<ExportCounters>,
    /// Detected events.
    pub events: Arc<EventLog>,
    /// Epoch counters that could not be handed to a decode thread in time.
    pub counts_dropped: AtomicU64,
    /// HTTP connections closed at once because the server had as many as it serves.
    pub http_refused: Arc<AtomicU64>,
    /// The flowsets received and not yet decoded into counters (and their memory).
    pub flowsets_held: Arc<HeldTotals>,
    /// The topology, if given.
    pub topology: Option<Arc<Topology>>,
    /// Where the live page draws the topology's switches (`crate::layout`), worked out for
    /// the first page.
    pub layout: std::sync::OnceLock<Vec<(String, f64, f64)>>,
    /// When the sink started.
    pub started: Instant,
    /// The settings.
    pub config: SinkConfig,
}

/// Work the sink has taken in and not yet applied: its views miss it until it is done
/// (`/api/health`'s `backlog`, the `pint_sink_backlog_*` gauges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Backlog {
    /// Flowsets received and not yet decoded into counters (queued, or waiting for the rest
    /// of their epoch).
    pub flowsets: usize,
    /// Digest batches, probe batches and epoch counters queued for the decode threads or
    /// being applied.
    pub decode_messages: usize,
}

impl Shared {
    /// The work taken in and not yet applied, now.
    pub fn backlog(&self) -> Backlog {
        Backlog {
            flowsets: self.flowsets_held.flowsets.load(Relaxed),
            decode_messages: self.shards.iter().map(|s| s.pending.load(Relaxed)).sum(),
        }
    }
}

/// A running sink.
pub struct Sink {
    shared: Arc<Shared>,
    listen: SocketAddr,
    http: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    ingest: Option<JoinHandle<()>>,
    assembler: Option<JoinHandle<()>>,
    shard_threads: Vec<JoinHandle<()>>,
    exporter: Option<JoinHandle<()>>,
    http_thread: Option<crate::api::HttpThread>,
}

impl Sink {
    /// Starts a sink; an error says which setting is wrong or what could not be opened.
    pub fn start(config: SinkConfig) -> anyhow::Result<Sink> {
        config.validate()?;
        let topology = match &config.topology {
            Some(p) => {
                let t = Topology::load(p).map_err(|e| anyhow::anyhow!("--topology: {e}"))?;
                if t.edges() == 0 {
                    anyhow::bail!(
                        "--topology: {} has no links between its {} switches (paths are decoded along links)",
                        p.display(),
                        t.len()
                    );
                }
                Some(Arc::new(t))
            }
            None => None,
        };
        let transport = TcpTransport::bind(config.listen)
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", config.listen))?;
        let listen = transport.local_addr()?;
        let http_listener = match config.http {
            Some(a) => Some(
                std::net::TcpListener::bind(a).map_err(|e| anyhow::anyhow!("--http {a}: {e}"))?,
            ),
            None => None,
        };
        let exports = Arc::new(ExportCounters::default());
        let outputs = Outputs::open(
            config.ipfix,
            config.template_interval,
            config.ipfix_rate,
            config.ipfix_message_bytes,
            config.json_lines.as_deref(),
            config.reopen.clone(),
            Arc::clone(&exports),
        )?;
        let registry = Arc::new(Registry::new(config.max_switches));
        let stop = Arc::new(AtomicBool::new(false));

        let (export_tx, exporter) = if outputs.any() {
            let (tx, rx) = bounded(EXPORT_QUEUE);
            let t = std::thread::Builder::new()
                .name("export".into())
                .spawn(move || outputs.run(rx))?;
            (Some(tx), Some(t))
        } else {
            (None, None)
        };

        let event_lines = match &config.event_lines {
            Some(p) => Some(LineFile::open("--event-lines", p, config.reopen.clone())?),
            None => None,
        };
        let events = Arc::new(EventLog::with_lines(event_lines));
        let cx = ShardContext {
            registry: Arc::clone(&registry),
            topology: topology.clone(),
            events: Arc::clone(&events),
            detection: Params::online(config.sensitivity),
            unfit_said_ms: Arc::default(),
        };
        let per_shard = config.max_flows / config.decode_threads;
        let timeouts = Timeouts {
            idle: config.idle_timeout,
            active: config.active_timeout,
        };
        let mut shards = Vec::with_capacity(config.decode_threads);
        let mut shard_threads = Vec::with_capacity(config.decode_threads);
        for i in 0..config.decode_threads {
            let (tx, rx) = bounded(config.queue_batches);
            let table = Arc::new(Mutex::new(FlowTable::new(per_shard)));
            let buffers = Buffers::new(BUFFERS_PER_SHARD);
            let pending = Arc::new(AtomicUsize::new(0));
            let unseen = Arc::new(shard::Unseen::default());
            let (p, u, t, c, e, b) = (
                Arc::clone(&pending),
                Arc::clone(&unseen),
                Arc::clone(&table),
                cx.clone(),
                export_tx.clone(),
                buffers.clone(),
            );
            shard_threads.push(
                std::thread::Builder::new()
                    .name(format!("decode-{i}"))
                    .spawn(move || shard::run(rx, p, u, t, c, timeouts, e, b))?,
            );
            shards.push(Shard {
                tx,
                table,
                buffers,
                pending,
                unseen,
            });
        }
        drop(export_tx);

        let epochs_log = Arc::new(EpochLog::default());
        let flowsets_held = Arc::new(HeldTotals::default());
        let shared = Arc::new(Shared {
            flowsets_held: Arc::clone(&flowsets_held),
            registry: Arc::clone(&registry),
            shards: shards.clone(),
            epochs: Arc::clone(&epochs_log),
            exports,
            events,
            counts_dropped: AtomicU64::new(0),
            http_refused: Arc::default(),
            topology: topology.clone(),
            layout: Default::default(),
            started: Instant::now(),
            config: config.clone(),
        });

        let (fs_tx, fs_rx) = bounded(FLOWSET_QUEUE);
        let assembler = {
            let (registry, log, shared) = (
                Arc::clone(&registry),
                Arc::clone(&epochs_log),
                Arc::clone(&shared),
            );
            let grace = config.epoch_grace;
            std::thread::Builder::new()
                .name("epochs".into())
                .spawn(move || {
                    let n = shared.shards.len();
                    let mut route = |all: epochs::EpochCounts| {
                        let mut parts: Vec<Vec<_>> = vec![Vec::new(); n];
                        for c in all.counts {
                            let (k, _, _, _) = &c;
                            parts[shard_of(k, n)].push(c);
                        }
                        for (i, counts) in parts.into_iter().enumerate() {
                            // Every decode thread hears of unsure switches, counts or none:
                            // its flows' loss must not take what those switches missed.
                            if counts.is_empty() && all.unsure.is_empty() {
                                continue;
                            }
                            let news_only = counts.is_empty();
                            let msg = ShardMsg::Counts(Box::new(epochs::EpochCounts {
                                epoch: all.epoch,
                                epoch_ms: all.epoch_ms,
                                counts,
                                unsure: all.unsure.clone(),
                                missing: all.missing.clone(),
                                leads: all.leads.clone(),
                            }));
                            if news_only {
                                // No counts to lose: never waits for a busy decode thread
                                // (a switch away is unsure in every epoch).
                                let _ = shared.shards[i].try_send(msg);
                            } else if let Err(SendTimeoutError::Timeout(_)) =
                                shared.shards[i].send_timeout(msg, Duration::from_secs(1))
                            {
                                shared.counts_dropped.fetch_add(1, Relaxed);
                            }
                        }
                    };
                    epochs::run(fs_rx, registry, log, grace, &mut route);
                })?
        };

        let ingest = ingest::serve(
            transport,
            Ingest {
                registry,
                shards,
                flowsets: fs_tx,
                flowsets_held: Arc::clone(&flowsets_held),
                flowset_memory_bytes: config.flowset_memory_bytes,
                max_flowset_bytes: config.max_flowset_bytes,
                max_connections: config.max_connections,
                topology: topology.clone(),
                stop: Arc::clone(&stop),
            },
        );

        let (http, http_thread) = match http_listener {
            Some(l) => {
                let (addr, t) = crate::api::serve(l, Arc::clone(&shared))?;
                (Some(addr), Some(t))
            }
            None => (None, None),
        };
        tracing::info!(
            listen = %listen,
            http = %http.map_or_else(|| "off".to_owned(), |a| a.to_string()),
            "pint-sink running"
        );
        Ok(Sink {
            shared,
            listen,
            http,
            stop,
            ingest: Some(ingest),
            assembler: Some(assembler),
            shard_threads,
            exporter,
            http_thread,
        })
    }

    /// Where switches connect.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// Where the HTTP API listens.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http
    }

    /// What the API reads.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops everything in order and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.ingest.take() {
            let _ = t.join();
        }
        // The assembler ends once every ingest thread has dropped its queue.
        if let Some(t) = self.assembler.take() {
            let _ = t.join();
        }
        // Decode threads are told to stop (the shared state keeps their queues open); each
        // exports what it holds first.
        for s in &self.shared.shards {
            let _ = s.tx.send(ShardMsg::Stop);
        }
        for t in self.shard_threads.drain(..) {
            let _ = t.join();
        }
        self.shared.events.flush_lines();
        if let Some(t) = self.exporter.take() {
            let _ = t.join();
        }
        if let Some((t, tx)) = self.http_thread.take() {
            let _ = tx.send(());
            let _ = t.join();
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.shutdown();
    }
}
