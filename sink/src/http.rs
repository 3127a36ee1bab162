//! The HTTP server's connections: a bounded number at once, each given a bounded time to
//! send a request's head and a bounded time in all ([`Limits`]). A client
//! that connects and stalls (or never reads its response) would otherwise hold its socket
//! and buffers for good, and enough of them would take the file descriptors the switches'
//! connections need.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How many connections the server takes and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is closed as soon as it is accepted (and
    /// counted).
    pub max_connections: usize,
    /// Time a connection has to send each request's head.
    pub header_timeout: Duration,
    /// Time a connection is kept in all, whatever it does (a browser reconnects).
    pub lifetime: Duration,
}

impl Default for Limits {
    /// 256 connections, 10 s for a request's head, 120 s in all (`docs/api.md`).
    fn default() -> Self {
        Limits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            lifetime: Duration::from_secs(120),
        }
    }
}

/// Time a connection is given to finish its response once it is past its lifetime or the
/// server is told to stop.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Wait after a failed accept (out of file descriptors, most likely).
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown` completes, within `limits`; connections
/// beyond their number are closed at once and counted in `refused`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
    refused: Arc<AtomicU64>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut shutdown = std::pin::pin!(shutdown);
    // Told to every connection when the server stops, so that each finishes the response
    // under way and closes.
    let (stopping, stop_seen) = tokio::sync::watch::channel(false);
    let mut accept_failed = 0u64;
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    accept_failed = 0;
                    stream
                }
                Err(e) => {
                    // Out of file descriptors or memory: wait rather than spin (but not
                    // past a stop). Other errors are one connection's. Said at 1, 2, 4,
                    // ... failures, not every wait while it lasts.
                    accept_failed += 1;
                    if accept_failed.is_power_of_two() {
                        tracing::warn!("http: accept: {e} ({accept_failed} failures in a row)");
                    }
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) {
                        tokio::select! {
                            _ = &mut shutdown => break,
                            _ = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                        }
                    }
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Answered 503 where the socket takes it at once (it never waits), and said in
            // the log at 1, 2, 4, ... refusals.
            let n = refused.fetch_add(1, Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(
                    "http: {} connections open, the most it serves: a new one is answered 503 and closed ({n} so far; pint_sink_http_connections_refused_total)",
                    limits.max_connections
                );
            }
            let _ = stream.try_write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 33\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many connections: try again\r\n",
            );
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stop_seen = stop_seen.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                // Not `half_close`: a client's end of its side is its leaving, which cancels
                // a request waiting for its turn (no work left behind); one that ends its
                // side after its request (`shutdown(SHUT_WR)`) gets no answer not ready by
                // then.
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            // An error here is the client's doing (it went away, sent garbage, was too
            // slow): nothing for the sink to report.
            tokio::select! {
                _ = conn.as_mut() => {
                    drop(slot);
                    return;
                }
                _ = tokio::time::sleep(limits.lifetime) => {}
                _ = stop_seen.changed() => {}
            }
            // Past its time, or the server stopping: the response under way is finished
            // (within the grace time), then the connection closes.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
            drop(slot);
        });
    }
    // No more connections taken; those under way finish (each holds a slot until it
    // closes) or are cut when the runtime goes.
    drop(listener);
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(
        CLOSE_GRACE,
        slots.acquire_many(limits.max_connections as u32),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::net::{SocketAddr, TcpStream};

    use axum::routing::get;

    use super::*;

    /// A server of one route within `limits` on a thread of its own; its address, its
    /// refused count and what stops it.
    fn start(limits: Limits) -> (SocketAddr, Arc<AtomicU64>, tokio::sync::oneshot::Sender<()>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let refused = Arc::new(AtomicU64::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let r = Arc::clone(&refused);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = TcpListener::from_std(l).unwrap();
                let router = Router::new().route("/", get(|| async { "up" }));
                serve(l, router, async { drop(rx.await) }, limits, r).await;
            });
        });
        (addr, refused, tx)
    }

    /// Whether the server closed `s` (end of stream or reset) within a minute.
    fn closed(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut buf = [0u8; 256];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                // A response (such as 408) before the close.
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }

    fn get_root(addr: SocketAddr) -> Option<String> {
        let mut s = TcpStream::connect(addr).ok()?;
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut resp = String::new();
        s.read_to_string(&mut resp).ok()?;
        Some(resp)
    }

    /// Connections beyond the limit are closed at once and counted; once one of those
    /// held goes, the server answers again.
    #[test]
    fn connections_beyond_the_limit_are_closed_and_counted() {
        let (addr, refused, _stop) = start(Limits {
            max_connections: 2,
            header_timeout: Duration::from_secs(600),
            lifetime: Duration::from_secs(600),
        });
        let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut extra = TcpStream::connect(addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        // Told why, then closed.
        let mut said = String::new();
        let _ = extra.read_to_string(&mut said);
        assert!(said.starts_with("HTTP/1.1 503 "), "{said:?}");
        assert!(
            said.ends_with("too many connections: try again\r\n"),
            "{said:?}"
        );
        assert!(closed(&mut extra), "the third connection stays open");
        assert_eq!(refused.load(Relaxed), 1);
        drop(held);
        let mut answered = None;
        for _ in 0..600 {
            answered = get_root(addr).filter(|r| r.starts_with("HTTP/1.1 200"));
            if answered.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(answered.is_some_and(|r| r.ends_with("up")));
    }

    /// A client that sends part of a request's head and stalls is closed after the header
    /// time; one that keeps asking on its connection is closed after the lifetime.
    #[test]
    fn stalled_connections_are_closed() {
        let (addr, refused, _stop) = start(Limits {
            max_connections: 8,
            header_timeout: Duration::from_millis(200),
            lifetime: Duration::from_millis(500),
        });
        let mut stalled = TcpStream::connect(addr).unwrap();
        stalled.write_all(b"GET / HTTP/1.1\r\nHost:").unwrap();
        assert!(closed(&mut stalled), "a stalled request head stays open");
        // Requests well within the header time, one after another past the lifetime: each
        // answered until the lifetime closes the connection.
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let t0 = std::time::Instant::now();
        let mut answered = 0;
        let closed_at = loop {
            let asked = kept.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut buf = [0u8; 256];
            match (asked, kept.read(&mut buf)) {
                (Ok(()), Ok(n)) if n > 0 => answered += 1,
                _ => break t0.elapsed(),
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "never closed");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(answered > 1, "{answered} answered");
        assert!(
            closed_at >= Duration::from_millis(500),
            "closed after {closed_at:?}"
        );
        assert_eq!(refused.load(Relaxed), 0);
    }
}
