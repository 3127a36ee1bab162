//! The connection to the sink: a thread of its own that owns the TCP stream, so that
//! neither the control thread nor any worker ever waits on the network. The control thread
//! hands it frame payloads through a queue bounded in bytes; the exporter numbers them,
//! writes them, and reconnects with exponential backoff when the sink is absent or goes
//! away. What cannot be queued or sent is dropped and counted; after every (re)connection
//! the sink first gets a hello and the plans still in use.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use telemetry::protocol::{DigestEncoder, FrameType, Hello, PlanText, WireDigest, encode_frame};

/// First wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait before reconnecting.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a write may block before the connection counts as broken.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long data written may stay unacknowledged, and an idle connection's peer silent,
/// before the connection counts as broken: a sink host that died or was cut off is found
/// in seconds, not after TCP's retransmissions give up (about a quarter of an hour).
pub const DEAD_PEER_AFTER: Duration = Duration::from_secs(10);

/// A connection that took two writes this long or longer after its hello lasted: its loss
/// resets the backoff and is said each time (a sink restarted). One that broke sooner (a
/// sink that refuses the hello, another service on the port) does neither: a refusal shows
/// only at the second write after it (the first still goes into the socket), which a
/// switch with long epochs and rare statistics makes seconds later.
const STABLE_AFTER: Duration = Duration::from_secs(2);

/// One frame to send.
pub struct Outgoing {
    /// Its type.
    pub ty: FrameType,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Digests it carries (for the drop count).
    pub digests: u64,
    /// Flowsets it carries (for the drop count).
    pub flowsets: u64,
    /// Probe records it carries (for the drop count).
    pub probes: u64,
}

/// What the exporter announces on every connection.
#[derive(Debug, Clone)]
pub struct Announcement {
    /// The hello (with the current plan).
    pub hello: Hello,
    /// Older plans still in use by packets in flight, announced after the hello.
    pub older_plans: Vec<PlanText>,
}

/// The exporter's counters, read by the control thread.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Whether a connection is up.
    pub connected: AtomicBool,
    /// Connections made.
    pub connections: AtomicU64,
    /// Frames written.
    pub frames: AtomicU64,
    /// Bytes written.
    pub bytes: AtomicU64,
    /// Digests dropped (queue full, no connection, or a failed write).
    pub digests_dropped: AtomicU64,
    /// Flowsets dropped (as above).
    pub flowsets_dropped: AtomicU64,
    /// Probe records dropped (as above).
    pub probes_dropped: AtomicU64,
    /// Digests written.
    pub digests_sent: AtomicU64,
    /// Flowsets written.
    pub flowsets_sent: AtomicU64,
}

/// The control thread's end of the exporter.
pub struct Exporter {
    tx: Sender<Outgoing>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// The counters.
    pub stats: Arc<ExportStats>,
    /// What a new connection announces.
    pub announcement: Arc<Mutex<Announcement>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Starts the exporter thread towards `sink` (HOST:PORT), with a queue of at most
    /// `queue_bytes` bytes.
    pub fn start(sink: String, announcement: Announcement, queue_bytes: usize) -> Exporter {
        let (tx, rx) = crossbeam_channel::unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(ExportStats::default());
        let announcement = Arc::new(Mutex::new(announcement));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queued, stats, ann, stop) = (
                Arc::clone(&queued),
                Arc::clone(&stats),
                Arc::clone(&announcement),
                Arc::clone(&stop),
            );
            std::thread::Builder::new()
                .name("export".into())
                .spawn(move || run(sink, rx, queued, stats, ann, stop))
                .expect("spawning the export thread")
        };
        Exporter {
            tx,
            queued,
            limit: queue_bytes,
            stats,
            announcement,
            stop,
            thread: Some(thread),
        }
    }

    /// Queues a frame; drops it (counted) when the queue is full. Returns whether queued.
    pub fn send(&self, o: Outgoing) -> bool {
        if self.queued.load(Ordering::Relaxed) + o.payload.len() > self.limit {
            self.count_drop(&o);
            return false;
        }
        self.send_always(o)
    }

    /// Queues a frame however full the queue is: one the sink needs before the frames
    /// after it (a reloaded plan, before digests of it; a few KiB a reload). Dropped, a
    /// connection would carry digests of a plan its sink does not know, and the sink closes
    /// it. Returns whether queued (false only once the exporter has stopped).
    pub fn send_always(&self, o: Outgoing) -> bool {
        let len = o.payload.len();
        self.queued.fetch_add(len, Ordering::Relaxed);
        match self.tx.try_send(o) {
            Ok(()) => true,
            Err(TrySendError::Full(o) | TrySendError::Disconnected(o)) => {
                self.queued.fetch_sub(len, Ordering::Relaxed);
                self.count_drop(&o);
                false
            }
        }
    }

    fn count_drop(&self, o: &Outgoing) {
        count_drop(&self.stats, o);
    }

    /// Bytes waiting in the queue.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Sends what is queued (waiting at most `linger` for it to go) and stops the thread.
    pub fn finish(mut self, linger: Duration) {
        let start = Instant::now();
        while self.queued_bytes() > 0
            && self.stats.connected.load(Ordering::Relaxed)
            && start.elapsed() < linger
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Digest batches encoded for the exporter's connection: the encoder's flow slots are the
/// ones the sink holds for it, so they are forgotten when the exporter has opened a new
/// connection since the last batch, and when a batch could not be queued (its definitions
/// never reach the sink).
#[derive(Debug, Default)]
pub struct DigestSender {
    encoder: DigestEncoder,
    /// The exporter's connection count when the encoder's slots began.
    connection: u64,
}

impl DigestSender {
    /// Encodes worker `worker`'s `batch` (its plans' digest lengths from `digest_bytes`) and
    /// queues it on `ex`. Returns whether it was queued.
    pub fn send(
        &mut self,
        ex: &Exporter,
        worker: u16,
        batch: &[WireDigest],
        digest_bytes: impl Fn(u32) -> u8,
    ) -> bool {
        let connection = ex.stats.connections.load(Ordering::Relaxed);
        if connection != self.connection {
            self.encoder.reset();
            self.connection = connection;
        }
        let payload = self.encoder.encode(worker, batch, digest_bytes);
        let sent = ex.send(Outgoing {
            ty: FrameType::Digests,
            payload,
            digests: batch.len() as u64,
            flowsets: 0,
            probes: 0,
        });
        if !sent {
            self.encoder.reset();
        }
        sent
    }

    /// Flow slots the encoder holds.
    pub fn slots_in_use(&self) -> usize {
        self.encoder.slots_in_use()
    }
}

fn count_drop(stats: &ExportStats, o: &Outgoing) {
    stats
        .digests_dropped
        .fetch_add(o.digests, Ordering::Relaxed);
    stats
        .flowsets_dropped
        .fetch_add(o.flowsets, Ordering::Relaxed);
    stats.probes_dropped.fetch_add(o.probes, Ordering::Relaxed);
}

fn connect(sink: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for addr in sink.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Makes the kernel break `stream` when data written stays unacknowledged for `after`
/// (`TCP_USER_TIMEOUT`), and probe an idle peer so that a silent one is found within about
/// `after` too (keepalive after half of it, three probes a sixth of it apart).
fn find_dead_peers(stream: &TcpStream, after: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| {
        // SAFETY: `fd` is an open socket for the call; the value is a c_int of that size.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&raw const value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let ms = after.as_millis().min(i32::MAX as u128) as libc::c_int;
    let secs = (ms / 1000).max(6);
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)?;
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs / 2)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, secs / 6)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3)
}

/// An open connection and its next sequence number.
struct Connection {
    stream: TcpStream,
    seq: u64,
}

impl Connection {
    fn write(&mut self, ty: FrameType, payload: &[u8], stats: &ExportStats) -> std::io::Result<()> {
        let frame = encode_frame(ty, self.seq, payload);
        self.seq += 1;
        self.stream.write_all(&frame)?;
        stats.frames.fetch_add(1, Ordering::Relaxed);
        stats.bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn open(
    sink: &str,
    ann: &Mutex<Announcement>,
    stats: &ExportStats,
    last_error: &mut Option<String>,
) -> Option<Connection> {
    let stream = match connect(sink) {
        Ok(s) => s,
        Err(e) => {
            // Said once, and again when the reason changes (an address that does not
            // resolve, nothing listening): a sink that is down is otherwise silent.
            let why = e.to_string();
            if last_error.as_deref() != Some(why.as_str()) {
                crate::say!("telemetry sink {sink}: cannot connect: {why} (retrying)");
                *last_error = Some(why);
            }
            return None;
        }
    };
    if last_error.take().is_some() {
        crate::say!("telemetry sink {sink}: connected");
    }
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = find_dead_peers(&stream, DEAD_PEER_AFTER);
    let mut c = Connection { stream, seq: 0 };
    let a = ann.lock().map(|a| a.clone()).ok()?;
    if c.write(FrameType::Hello, &a.hello.payload(), stats)
        .is_err()
    {
        return None;
    }
    // The older plans, oldest first, then the hello's again when there were any: the last
    // plan frame is the one in force (a reload right after is then simply the next one).
    let again = a.hello.plan.iter().filter(|_| !a.older_plans.is_empty());
    for p in a.older_plans.iter().chain(again) {
        if c.write(FrameType::Plan, &p.payload(), stats).is_err() {
            return None;
        }
    }
    stats.connections.fetch_add(1, Ordering::Relaxed);
    stats.connected.store(true, Ordering::Relaxed);
    Some(c)
}

fn run(
    sink: String,
    rx: Receiver<Outgoing>,
    queued: Arc<AtomicUsize>,
    stats: Arc<ExportStats>,
    ann: Arc<Mutex<Announcement>>,
    stop: Arc<AtomicBool>,
) {
    let mut conn: Option<Connection> = None;
    let mut backoff = MIN_BACKOFF;
    let mut next_try = Instant::now();
    let mut opened_at = Instant::now();
    // Writes the connection took from `STABLE_AFTER` on.
    let mut settled_writes = 0u32;
    let mut last_error = None;
    // Why the last connection that broke soon after its hello broke: said once, not at
    // each retry of a sink that keeps refusing the switch.
    let mut last_refusal: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        if conn.is_none() && Instant::now() >= next_try {
            conn = open(&sink, &ann, &stats, &mut last_error);
            if conn.is_some() {
                opened_at = Instant::now();
                settled_writes = 0;
            } else {
                next_try = Instant::now() + backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        let o = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(o) => o,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        queued.fetch_sub(o.payload.len(), Ordering::Relaxed);
        let written = conn.as_mut().map(|c| c.write(o.ty, &o.payload, &stats));
        if let Some(Ok(())) = written {
            stats.digests_sent.fetch_add(o.digests, Ordering::Relaxed);
            stats.flowsets_sent.fetch_add(o.flowsets, Ordering::Relaxed);
            if opened_at.elapsed() >= STABLE_AFTER {
                settled_writes = settled_writes.saturating_add(1);
                // After refusals were said, the connection that lasts is said too (the
                // stats line alone said `sink up`).
                if settled_writes == 2 && last_refusal.take().is_some() {
                    crate::say!(
                        "telemetry sink {sink}: connected, and the sink keeps the connection"
                    );
                }
            }
        } else {
            count_drop(&stats, &o);
            if conn.take().is_some() {
                stats.connected.store(false, Ordering::Relaxed);
                let why = written
                    .and_then(Result::err)
                    .map_or_else(String::new, |e| e.to_string());
                let lasted = opened_at.elapsed();
                if settled_writes >= 2 {
                    backoff = MIN_BACKOFF;
                    // Every loss of a connection that lasted is said (each restart of the
                    // sink), and the next connection that opens says so; a refusal after
                    // it is said too.
                    crate::say!("telemetry sink {sink}: connection lost: {why} (reconnecting)");
                    last_error = Some(why);
                    last_refusal = None;
                } else if last_refusal.as_deref() != Some(why.as_str()) {
                    crate::say!(
                        "telemetry sink {sink}: connection closed {} ms after the hello: {why} (a sink refuses a switch whose switch_id is connected from another process, or beyond its --max-switches: see the sink's log; retrying)",
                        lasted.as_millis()
                    );
                    last_refusal = Some(why);
                }
                next_try = Instant::now() + backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    stats.connected.store(false, Ordering::Relaxed);
    // What is still queued at the stop is not sent: counted as dropped.
    for o in rx.try_iter() {
        queued.fetch_sub(o.payload.len(), Ordering::Relaxed);
        count_drop(&stats, &o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;
    use telemetry::flowradar::wire::Shape;
    use telemetry::protocol::{Frame, Session, frame_len};

    fn hello() -> Hello {
        Hello {
            switch_id: 3,
            session: 1,
            epoch_ns: 10_000_000,
            shim_ethertype: 0x88b5,
            shape: Shape {
                hashes: 3,
                cells_per_table: 10,
                filter_blocks: 1,
            },
            filter_seed: 1,
            table_seeds: vec![2],
            max_digests: 16,
            ports: Vec::new(),
            plan: None,
        }
    }

    fn stats_frame(n: u64) -> Outgoing {
        Outgoing {
            ty: FrameType::Stats,
            payload: telemetry::protocol::Stats {
                counters: vec![("n".into(), n)],
            }
            .payload(),
            digests: 0,
            flowsets: 0,
            probes: 0,
        }
    }

    fn read_frames(s: &mut TcpStream, n: usize) -> Vec<Frame> {
        read_until(s, |frames| frames.len() >= n)
    }

    /// The frames of a connection read from its start until `done` says they are enough.
    fn read_until(s: &mut TcpStream, done: impl Fn(&[Frame]) -> bool) -> Vec<Frame> {
        let mut session = Session::default();
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        while !done(&out) {
            while let Ok(Some(len)) = frame_len(&buf) {
                if buf.len() < len || done(&out) {
                    break;
                }
                out.push(session.decode(&buf[..len]).unwrap());
                buf.drain(..len);
            }
            if done(&out) {
                break;
            }
            let got = s.read(&mut chunk).unwrap();
            assert!(got > 0, "the exporter closed the connection");
            buf.extend_from_slice(&chunk[..got]);
        }
        out
    }

    /// Frames still queued when the exporter stops (no sink) are counted as dropped, so
    /// that the switch never counts them as exported.
    #[test]
    fn frames_left_at_the_stop_are_counted_as_dropped() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ex = Exporter::start(
            format!("127.0.0.1:{port}"),
            Announcement {
                hello: hello(),
                older_plans: Vec::new(),
            },
            1 << 20,
        );
        for _ in 0..3 {
            assert!(ex.send(Outgoing {
                digests: 5,
                ..stats_frame(1)
            }));
        }
        let stats = Arc::clone(&ex.stats);
        ex.finish(Duration::ZERO);
        assert_eq!(stats.digests_dropped.load(Ordering::Relaxed), 15);
        assert_eq!(stats.digests_sent.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn reconnects_and_says_hello_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let ex = Exporter::start(
            addr,
            Announcement {
                hello: hello(),
                older_plans: Vec::new(),
            },
            1 << 20,
        );
        let (mut s, _) = l.accept().unwrap();
        assert!(ex.send(stats_frame(1)));
        let f = read_frames(&mut s, 2);
        assert!(matches!(f[0], Frame::Hello(_)));
        assert!(matches!(f[1], Frame::Stats(_)));
        // The sink goes away: frames are dropped until it is back, then a new hello comes.
        drop(s);
        let t0 = Instant::now();
        while ex.stats.connected.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(5) {
            ex.send(stats_frame(2));
            std::thread::sleep(Duration::from_millis(20));
        }
        let (mut s, _) = l.accept().unwrap();
        ex.send(stats_frame(3));
        let f = read_frames(&mut s, 2);
        assert!(matches!(f[0], Frame::Hello(_)));
        assert!(ex.stats.connections.load(Ordering::Relaxed) >= 2);
        ex.finish(Duration::from_millis(100));
    }

    /// After its hello a connection gets the older plans, oldest first, then the hello's
    /// plan again: the last plan declared is the one in force (a reload just after is the
    /// next plan frame, and a collector taking each plan frame as in force is right).
    #[test]
    fn older_plans_come_after_the_hello_then_the_plan_in_force() {
        let plan = |version: u32| PlanText {
            version,
            digest_bytes: 2,
            text: format!("# {version}"),
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ex = Exporter::start(
            l.local_addr().unwrap().to_string(),
            Announcement {
                hello: Hello {
                    plan: Some(plan(3)),
                    ..hello()
                },
                older_plans: vec![plan(1), plan(2)],
            },
            1 << 20,
        );
        let (mut s, _) = l.accept().unwrap();
        assert!(ex.send(stats_frame(1)));
        let versions: Vec<Option<u32>> = read_frames(&mut s, 5)
            .into_iter()
            .map(|f| match f {
                Frame::Hello(h) => h.plan.map(|p| p.version),
                Frame::Plan(p) => Some(p.version),
                _ => None,
            })
            .collect();
        assert_eq!(versions, [Some(3), Some(1), Some(2), Some(3), None]);
        ex.finish(Duration::from_millis(100));
    }

    fn digests(n: usize, flows: u32) -> Vec<WireDigest> {
        (0..n)
            .map(|i| WireDigest {
                key: telemetry::flowradar::FlowKey {
                    src: 0x0a00_0001 + i as u32 % flows,
                    dst: 0x0a00_0101,
                    src_port: 5,
                    dst_port: 6,
                    protocol: 17,
                },
                ingress_port: 0,
                egress_port: 0,
                pid: i as u32,
                hops: 2,
                plan_version: 1,
                digest: i as u64 & 0xffff,
                time_ns: 1_000 + i as u64,
            })
            .collect()
    }

    /// Waits (calling `meanwhile` every few milliseconds, for at most 10 s) until the
    /// exporter has made `n` connections.
    fn wait_connections(ex: &Exporter, n: u64, mut meanwhile: impl FnMut()) {
        let t0 = Instant::now();
        while ex.stats.connections.load(Ordering::Relaxed) < n
            && t0.elapsed() < Duration::from_secs(10)
        {
            meanwhile();
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            ex.stats.connections.load(Ordering::Relaxed) >= n,
            "no connection {n}"
        );
    }

    fn digest_frame(f: Frame) -> telemetry::protocol::DigestBatch {
        match f {
            Frame::Digests(b) => b,
            other => panic!("a digest frame, got {other:?}"),
        }
    }

    /// A batch that could not be queued leaves no slot behind (its definitions never reach
    /// the sink), and after a reconnection the next batch defines every flow it names: the
    /// sink decodes all of it on the new connection.
    #[test]
    fn digest_slots_follow_the_connection() {
        let mut h = hello();
        h.max_digests = 64;
        h.ports = vec![telemetry::protocol::PortInfo {
            name: "hosts".into(),
            edge: true,
            capacity_bps: 10_000_000_000,
            mac: telemetry::wire::MacAddr([2, 0, 0, 0, 0, 1]),
        }];
        h.plan = Some(PlanText {
            version: 1,
            digest_bytes: 2,
            text: String::new(),
        });
        let ann = Announcement {
            hello: h.clone(),
            older_plans: Vec::new(),
        };
        // A queue too small for any batch: nothing is queued, nothing kept.
        let small = Exporter::start("127.0.0.1:1".into(), ann.clone(), 16);
        let mut d = DigestSender::default();
        assert!(!d.send(&small, 0, &digests(10, 5), |_| 2));
        assert_eq!(d.slots_in_use(), 0);
        drop(small);

        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ex = Exporter::start(l.local_addr().unwrap().to_string(), ann, 1 << 20);
        let (mut s, _) = l.accept().unwrap();
        wait_connections(&ex, 1, || {});
        let mut d = DigestSender::default();
        assert!(d.send(&ex, 0, &digests(20, 5), |_| 2));
        assert!(d.send(&ex, 0, &digests(20, 5), |_| 2));
        let f = read_frames(&mut s, 3);
        for b in f.into_iter().skip(1).map(digest_frame) {
            assert_eq!((b.digests.len(), b.unknown_flow), (20, 0));
        }
        assert_eq!(d.slots_in_use(), 5);
        // The sink goes away and comes back: a new connection, with no slots at the sink.
        drop(s);
        // Frames sent meanwhile find the old connection broken.
        wait_connections(&ex, 2, || {
            ex.send(stats_frame(2));
        });
        let (mut s, _) = l.accept().unwrap();
        assert!(d.send(&ex, 0, &digests(20, 5), |_| 2));
        let frames = read_until(&mut s, |f| matches!(f.last(), Some(Frame::Digests(_))));
        let batch = digest_frame(frames.into_iter().last().expect("a digest frame"));
        assert_eq!((batch.digests.len(), batch.unknown_flow), (20, 0));
        ex.finish(Duration::from_millis(100));
    }

    /// The exporter's connections give up on a sink that stopped acknowledging, or went
    /// silent, within [`DEAD_PEER_AFTER`].
    #[test]
    fn connections_find_a_dead_sink() {
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        find_dead_peers(&s, DEAD_PEER_AFTER).unwrap();
        let get = |level: libc::c_int, name: libc::c_int| {
            let mut v: libc::c_int = -1;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: an open socket; `v` and `len` are valid for the call to fill.
            let r = unsafe {
                libc::getsockopt(
                    s.as_raw_fd(),
                    level,
                    name,
                    (&raw mut v).cast(),
                    &raw mut len,
                )
            };
            assert_eq!(r, 0);
            v
        };
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 10_000);
        assert_eq!(get(libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 5);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 1);
        assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        // Nobody listens: nothing is ever sent.
        let ex = Exporter::start(
            "127.0.0.1:1".into(),
            Announcement {
                hello: hello(),
                older_plans: Vec::new(),
            },
            100,
        );
        let big = Outgoing {
            ty: FrameType::Digests,
            payload: vec![0; 200],
            digests: 7,
            flowsets: 0,
            probes: 3,
        };
        assert!(!ex.send(big));
        assert_eq!(ex.stats.digests_dropped.load(Ordering::Relaxed), 7);
        assert_eq!(ex.stats.probes_dropped.load(Ordering::Relaxed), 3);
        // A frame the sink needs before what follows goes however full the queue is.
        let plan = Outgoing {
            ty: FrameType::Plan,
            payload: vec![0; 200],
            digests: 0,
            flowsets: 0,
            probes: 0,
        };
        assert!(ex.send_always(plan));
    }
}
