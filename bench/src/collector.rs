//! A stand-in for the sink: a TCP server on loopback that accepts switches, decodes every
//! frame with the protocol's own decoder, and keeps (or only counts) what arrives. The
//! forwarding benchmark measures export with it; tests check what switches send.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use telemetry::protocol::{
    FlowSetFrame, Frame, Hello, PlanText, Session, Stats, WireDigest, WireProbe, frame_len,
};

/// What arrived.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// Connections accepted.
    pub connections: u64,
    /// Frames decoded.
    pub frames: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Digests received.
    pub digest_count: u64,
    /// Bytes of digest frames (headers included).
    pub digest_bytes: u64,
    /// The digests (kept only when asked).
    pub digests: Vec<WireDigest>,
    /// Flowset frames (kept only when asked; counted always).
    pub flowsets: Vec<FlowSetFrame>,
    /// Flowset frames received.
    pub flowset_count: u64,
    /// Hellos, in order.
    pub hellos: Vec<Hello>,
    /// Plan frames, in order.
    pub plans: Vec<PlanText>,
    /// The last stats frame.
    pub stats: Option<Stats>,
    /// Probe arrivals (kept only when asked).
    pub probes: Vec<WireProbe>,
    /// Sequence gaps over all connections.
    pub gaps: u64,
    /// Decoding errors (each closes its connection).
    pub errors: Vec<String>,
}

/// The running stand-in.
pub struct Collector {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    data: Arc<Mutex<Collected>>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    /// Listens on a free loopback port; `keep` keeps every digest and flowset.
    pub fn start(keep: bool) -> std::io::Result<Collector> {
        Collector::bind("127.0.0.1:0".parse().expect("address"), keep)
    }

    /// Listens on `addr` (to come back on the same port after a stop).
    pub fn bind(addr: SocketAddr, keep: bool) -> std::io::Result<Collector> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let data = Arc::new(Mutex::new(Collected::default()));
        let thread = {
            let (stop, data) = (Arc::clone(&stop), Arc::clone(&data));
            std::thread::spawn(move || accept(listener, stop, data, keep))
        };
        Ok(Collector {
            addr,
            stop,
            data,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A copy of what arrived so far.
    pub fn snapshot(&self) -> Collected {
        self.data.lock().expect("collector lock").clone()
    }

    /// Runs `f` on what arrived so far (without copying it).
    pub fn with<T>(&self, f: impl FnOnce(&Collected) -> T) -> T {
        f(&self.data.lock().expect("collector lock"))
    }

    /// Closes the listener and every connection; returns what arrived.
    pub fn stop(mut self) -> Collected {
        self.shutdown();
        std::mem::take(&mut *self.data.lock().expect("collector lock"))
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept(listener: TcpListener, stop: Arc<AtomicBool>, data: Arc<Mutex<Collected>>, keep: bool) {
    let mut readers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                data.lock().expect("collector lock").connections += 1;
                let (stop, data) = (Arc::clone(&stop), Arc::clone(&data));
                readers.push(std::thread::spawn(move || read(s, stop, data, keep)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    drop(listener);
    for r in readers {
        let _ = r.join();
    }
}

fn read(mut s: TcpStream, stop: Arc<AtomicBool>, data: Arc<Mutex<Collected>>, keep: bool) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut session = Session::default();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut d = data.lock().expect("collector lock");
        d.bytes += n as u64;
        let mut at = 0;
        loop {
            let len = match frame_len(&buf[at..]) {
                Ok(Some(len)) if buf.len() - at >= len => len,
                Ok(_) => break,
                Err(e) => {
                    d.errors.push(e.to_string());
                    return;
                }
            };
            let frame = &buf[at..at + len];
            at += len;
            let gaps = session.gaps;
            match session.decode(frame) {
                Ok(f) => {
                    d.frames += 1;
                    match f {
                        Frame::Hello(h) => d.hellos.push(h),
                        Frame::Plan(p) => d.plans.push(p),
                        Frame::Digests(b) => {
                            d.digest_count += b.digests.len() as u64;
                            d.digest_bytes += len as u64;
                            if keep {
                                d.digests.extend(b.digests);
                            }
                        }
                        Frame::FlowSet(f) => {
                            d.flowset_count += 1;
                            if keep {
                                d.flowsets.push(f);
                            }
                        }
                        Frame::Stats(st) => d.stats = Some(st),
                        Frame::Probes(b) => {
                            if keep {
                                d.probes.extend(b.probes);
                            }
                        }
                    }
                }
                Err(e) => {
                    d.errors.push(e.to_string());
                    return;
                }
            }
            d.gaps += session.gaps - gaps;
        }
        buf.drain(..at);
    }
}
