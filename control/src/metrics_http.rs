//! The switch's Prometheus endpoint: `GET /metrics` over HTTP/1.x, on a thread of its own
//! with bounded work. A scrape renders the registry; nothing here touches the data plane.
//! Clients are bounded in number and in time (a slow or idle one is closed), so that no
//! client, however many or slow, takes the switch's threads, memory or file descriptors
//! from its control thread and its connection to the sink.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusHandle;

/// Bounds on the endpoint's clients.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; one more is answered 503 and closed.
    pub connections: usize,
    /// Longest wait for a request's head.
    pub head_timeout: Duration,
    /// Longest a response may take to be written.
    pub write_timeout: Duration,
    /// Largest request head, bytes.
    pub head_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 8,
            head_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
            head_bytes: 8 << 10,
        }
    }
}

/// Pause after a failed accept (out of file descriptors: retrying at once would spin).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `handle`'s metrics on `listener` until the process ends.
#[cold]
pub fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
    limits: Limits,
) -> std::io::Result<JoinHandle<()>> {
    let handle = Arc::new(handle);
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            loop {
                let stream = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(_) => {
                        std::thread::sleep(ACCEPT_BACKOFF);
                        continue;
                    }
                };
                if active.load(Acquire) >= limits.connections {
                    refuse(stream);
                    continue;
                }
                active.fetch_add(1, Relaxed);
                let place = Place(Arc::clone(&active));
                let handle = Arc::clone(&handle);
                // A thread that cannot be made drops its closure, the place with it.
                let _ = std::thread::Builder::new()
                    .name("metrics-client".into())
                    .spawn(move || {
                        let mut stream = stream;
                        answer(&mut stream, &handle, &limits);
                        // The place is given back before the connection closes: a client
                        // that has read its answer to the end finds it free.
                        drop(place);
                        drop(stream);
                    });
            }
        })
}

/// One of the endpoint's places, held while a client is served and given back when
/// dropped (also when answering panics).
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Release);
    }
}

/// Answers a connection beyond the limit: 503, closed.
fn refuse(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = stream.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
    );
    finish(&mut stream);
}

/// Bytes of a request read and let go before closing, at most.
const DRAIN_BYTES: usize = 64 << 10;

/// Readies the close after an answer: what the client sent and was not read (a request
/// refused unread) is read and let go, without waiting, so that the close is no reset,
/// which could take the answer with it. The close itself, the answer's end for the client,
/// comes after the place is given back.
fn finish(stream: &mut TcpStream) {
    if stream.set_nonblocking(true).is_ok() {
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < DRAIN_BYTES {
            match stream.read(&mut buf) {
                Ok(n) if n > 0 => drained += n,
                _ => break,
            }
        }
    }
}

/// Writes `bytes` by `deadline` (a client that reads slowly is cut off there, not given the
/// write timeout again for each part it takes).
fn send_by(stream: &mut TcpStream, bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    for part in bytes.chunks(16 << 10) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        stream.write_all(part)?;
    }
    Ok(())
}

/// What a request's head asks for.
#[derive(Debug, PartialEq)]
enum Asked {
    /// `GET` or `HEAD` (`true`) of `/metrics`.
    Metrics { head: bool },
    /// A method other than GET and HEAD.
    Method,
    /// Another path.
    Path,
    /// A head that does not parse.
    Bad,
}

/// Reads a request head's first line.
fn asked(head: &[u8]) -> Asked {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(b"");
    let Ok(line) = std::str::from_utf8(line) else {
        return Asked::Bad;
    };
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Asked::Bad;
    };
    if !version.starts_with("HTTP/1.") {
        return Asked::Bad;
    }
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Asked::Metrics {
            head: method == "HEAD",
        },
        ("GET" | "HEAD", _) => Asked::Path,
        _ => Asked::Method,
    }
}

/// Reads one request and answers it; the connection then closes.
fn answer(stream: &mut TcpStream, handle: &PrometheusHandle, limits: &Limits) {
    let deadline = Instant::now() + limits.head_timeout;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if head.len() > limits.head_bytes {
            break false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    let plain = |status: &str, extra: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let response = if !complete {
        plain("431 Request Header Fields Too Large", "", "")
    } else {
        match asked(&head) {
            Asked::Metrics { head } => {
                handle.run_upkeep();
                let body = telemetry::exposition::in_order(&handle.render());
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{}",
                    body.len(),
                    if head { "" } else { body.as_str() }
                )
            }
            Asked::Method => plain(
                "405 Method Not Allowed",
                "Allow: GET, HEAD\r\n",
                "only GET and HEAD of /metrics\n",
            ),
            Asked::Path => plain(
                "404 Not Found",
                "",
                "not found: the switch serves its metrics at /metrics\n",
            ),
            Asked::Bad => plain("400 Bad Request", "", "not an HTTP/1 request\n"),
        }
    };
    if send_by(
        stream,
        response.as_bytes(),
        Instant::now() + limits.write_timeout,
    )
    .is_ok()
    {
        finish(stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_exporter_prometheus::PrometheusBuilder;

    fn request(addr: std::net::SocketAddr, text: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(text.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// An endpoint on a free loopback port within `limits`, serving a registry of its own
    /// filled by `record`; its address.
    fn endpoint(limits: Limits, record: impl FnOnce()) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let recorder = PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, record);
        serve(listener, recorder.handle(), limits).unwrap();
        addr
    }

    /// `/metrics` is served, other paths and methods are refused with their statuses, a
    /// client beyond the limit is answered 503 at once, and an idle one is closed after the
    /// head's time: none holds the endpoint.
    #[test]
    fn the_endpoint_serves_metrics_and_bounds_its_clients() {
        let record = || metrics::counter!("pint_switch_test_total").increment(3);
        // A head time no stall of a busy machine outlasts: the idle clients below hold
        // their places until they close.
        let limits = Limits {
            connections: 2,
            head_timeout: Duration::from_secs(600),
            ..Limits::default()
        };
        let addr = endpoint(limits, record);
        let ok = request(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("version=0.0.4"), "{ok}");
        assert!(ok.contains("pint_switch_test_total 3"), "{ok}");
        let head = request(addr, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        for (req, status) in [
            ("GET /other HTTP/1.1\r\n\r\n", "404"),
            ("POST /metrics HTTP/1.1\r\n\r\n", "405"),
            ("GET /metrics\r\n\r\n", "400"),
        ] {
            let r = request(addr, req);
            assert!(
                r.starts_with(&format!("HTTP/1.1 {status} ")),
                "{req:?}: {r}"
            );
        }
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        assert!(request(addr, &huge).starts_with("HTTP/1.1 431 "));
        // Every place above was given back before its client read the end of its answer:
        // two idle clients take both places, and a third (accepted after them) is refused.
        let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let refused = request(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(refused.starts_with("HTTP/1.1 503 "), "{refused}");
        // An idle client that goes away gives its place back.
        drop(idle);
        let again = served_within(addr, Duration::from_secs(60));
        assert!(again.starts_with("HTTP/1.1 200 OK\r\n"), "{again}");

        // An idle client is closed after the head's time, and its place given back.
        let short = Limits {
            connections: 1,
            head_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let addr = endpoint(short, record);
        let mut idle = TcpStream::connect(addr).unwrap();
        idle.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(
            idle.read(&mut byte).unwrap(),
            0,
            "the idle client is closed"
        );
        let after = request(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(after.starts_with("HTTP/1.1 200 OK\r\n"), "{after}");
    }

    /// Asks for the metrics until they are served or `limit` has passed; the last answer.
    fn served_within(addr: std::net::SocketAddr, limit: Duration) -> String {
        let t = Instant::now();
        loop {
            let r = request(addr, "GET /metrics HTTP/1.1\r\n\r\n");
            if r.starts_with("HTTP/1.1 200 OK\r\n") || t.elapsed() > limit {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client that reads its answer slowly, a little within each write timeout, is cut
    /// off when the answer's time is up: it cannot hold its place for longer.
    #[test]
    fn a_slow_reader_is_cut_off_when_the_answer_time_is_up() {
        let limits = Limits {
            write_timeout: Duration::from_secs(1),
            ..Limits::default()
        };
        // An answer of some 15 MB, more than the sockets' buffers hold.
        let addr = endpoint(limits, || {
            for i in 0..200_000u32 {
                metrics::counter!("pint_switch_test_total", "series" => format!("{i:0>40}"))
                    .increment(1);
            }
        });
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let t0 = Instant::now();
        let (mut got, mut buf) = (0usize, vec![0u8; 256 << 10]);
        let mut head = Vec::new();
        let ended = loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break true,
                Ok(n) => {
                    if head.len() < 1024 {
                        head.extend_from_slice(&buf[..n.min(1024)]);
                    }
                    got += n;
                }
            }
            if t0.elapsed() > Duration::from_secs(60) {
                break false;
            }
            // Up to 256 KB every 50 ms (5 MB/s, or less on a busy machine): each write of
            // the server's goes on well within its second, the whole takes longer than it.
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(ended, "still reading after a minute ({got} bytes)");
        let head = String::from_utf8_lossy(&head);
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{head}"));
        assert!(length > 10_000_000, "{length}");
        assert!(got < length, "{got} bytes: the whole answer");
    }

    #[test]
    fn request_lines_read_as_asked() {
        assert_eq!(
            asked(b"GET /metrics?x=1 HTTP/1.1\r\n"),
            Asked::Metrics { head: false }
        );
        assert_eq!(
            asked(b"HEAD /metrics HTTP/1.0\r\n"),
            Asked::Metrics { head: true }
        );
        assert_eq!(asked(b"GET / HTTP/1.1\r\n"), Asked::Path);
        assert_eq!(asked(b"DELETE /metrics HTTP/1.1\r\n"), Asked::Method);
        assert_eq!(asked(b"GET /metrics HTTP/2.0\r\n"), Asked::Bad);
        assert_eq!(asked(b"\xff\xfe"), Asked::Bad);
    }
}
