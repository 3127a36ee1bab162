//! Where frames come from. The sink decodes frames; how they arrive is a transport: TCP from
//! each switch now. A message bus later (partitions keyed by flow hash for digests, by switch
//! and epoch for flowsets) is another implementation of these two traits, not a rewrite: each
//! partition is a [`FrameSource`] whose frames the same ingest code decodes.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use telemetry::protocol::{MAX_HELLO_FRAME, ProtocolError, frame_len};

/// What a source yields next.
#[derive(Debug)]
pub enum Next<'a> {
    /// One whole frame (length field included).
    Frame(&'a [u8]),
    /// Nothing for a while (the caller may check whether to stop).
    Idle,
    /// The peer closed the connection.
    Closed,
}

/// Why a source failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not frames (a length out of range).
    #[error("framing: {0}")]
    Framing(#[from] ProtocolError),
}

/// A stream of frames from one switch (or one partition).
pub trait FrameSource: Send + 'static {
    /// Who is at the other end (for logs and the API).
    fn peer(&self) -> String;
    /// The next frame, waiting a short while at most.
    fn next_frame(&mut self) -> Result<Next<'_>, SourceError>;
    /// Refuses frames longer than `max` bytes from now on (a source starts at
    /// [`MAX_HELLO_FRAME`]: nothing before a hello is larger; the hello raises it).
    fn set_max_frame(&mut self, _max: usize) {}
    /// When bytes last arrived, if it knows (a large frame arriving slowly is no silence).
    fn last_read(&self) -> Option<Instant> {
        None
    }
    /// Since when the frame under way has been arriving, if one is (a peer that sends a
    /// frame a few bytes at a time is not silent, but too slow).
    fn frame_since(&self) -> Option<Instant> {
        None
    }
}

/// Where sources come from.
pub trait Transport: Send + 'static {
    /// The sources it yields.
    type Source: FrameSource;
    /// A new source, waiting a short while at most (None: none yet).
    fn accept(&mut self) -> std::io::Result<Option<Self::Source>>;
}

/// Switches connecting over TCP.
pub struct TcpTransport {
    listener: TcpListener,
}

/// How long a read or accept waits before reporting idle; a frame arriving slowly is
/// reported idle after as long, so that its reader checks its deadlines.
const POLL: Duration = Duration::from_millis(100);
/// Receive buffer kept between frames; one grown past [`SHRINK_ABOVE`] for large frames
/// goes back to it once none has come for [`SHRINK_AFTER`] (a switch that sends a large
/// flowset every epoch keeps its buffer).
const BUFFER: usize = 1 << 16;
const SHRINK_ABOVE: usize = 1 << 20;
const SHRINK_AFTER: Duration = Duration::from_secs(10);

impl TcpTransport {
    /// Listens on `addr`.
    pub fn bind(addr: SocketAddr) -> std::io::Result<TcpTransport> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(TcpTransport { listener })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl Transport for TcpTransport {
    type Source = TcpSource;

    fn accept(&mut self) -> std::io::Result<Option<TcpSource>> {
        match self.listener.accept() {
            Ok((stream, peer)) => {
                stream.set_nonblocking(false)?;
                stream.set_read_timeout(Some(POLL))?;
                let _ = stream.set_nodelay(true);
                Ok(Some(TcpSource {
                    stream,
                    peer,
                    buf: vec![0; BUFFER],
                    start: 0,
                    end: 0,
                    max_frame: MAX_HELLO_FRAME,
                    last_read: None,
                    frame_since: None,
                    large_at: Instant::now(),
                }))
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(POLL / 4);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// One switch's TCP connection.
pub struct TcpSource {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Longest frame taken (see [`FrameSource::set_max_frame`]).
    max_frame: usize,
    /// When bytes last arrived.
    last_read: Option<Instant>,
    /// When the first bytes of the frame under way arrived (None: none under way).
    frame_since: Option<Instant>,
    /// When the last frame larger than [`BUFFER`] was read.
    large_at: Instant,
}

impl FrameSource for TcpSource {
    fn peer(&self) -> String {
        self.peer.to_string()
    }

    fn set_max_frame(&mut self, max: usize) {
        self.max_frame = max;
    }

    fn last_read(&self) -> Option<Instant> {
        self.last_read
    }

    fn frame_since(&self) -> Option<Instant> {
        self.frame_since
    }

    fn next_frame(&mut self) -> Result<Next<'_>, SourceError> {
        let called = std::time::Instant::now();
        loop {
            let pending = frame_len(&self.buf[self.start..self.end])?;
            if let Some(len) = pending {
                if len > self.max_frame {
                    return Err(ProtocolError::BadLength(len).into());
                }
                if self.end - self.start >= len {
                    let at = self.start;
                    self.start += len;
                    self.frame_since = (self.start < self.end).then(Instant::now);
                    if len > BUFFER {
                        self.large_at = Instant::now();
                    }
                    return Ok(Next::Frame(&self.buf[at..at + len]));
                }
            }
            // Make room: move what is left to the front; for a large frame (its length was
            // checked against the caps) grow as its bytes arrive, doubling, so that memory
            // follows what a peer sent, not what it declared; once it is read, go back to
            // the usual size.
            let need = pending.unwrap_or(4);
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() > SHRINK_ABOVE
                && self.end <= BUFFER
                && need <= BUFFER
                && self.large_at.elapsed() >= SHRINK_AFTER
            {
                self.buf.truncate(BUFFER);
                self.buf.shrink_to_fit();
            }
            if self.end == self.buf.len() && self.buf.len() < need {
                let grown = need.min(self.buf.len().saturating_mul(2));
                self.buf.resize(grown, 0);
            }
            // A frame arriving a few bytes at a time still lets its reader check its
            // deadlines (a peer that trickles would otherwise hold it for good).
            if called.elapsed() >= POLL {
                return Ok(Next::Idle);
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(Next::Closed),
                Ok(n) => {
                    let now = Instant::now();
                    self.end += n;
                    self.last_read = Some(now);
                    self.frame_since.get_or_insert(now);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(Next::Idle);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use telemetry::protocol::{FrameType, encode_frame};

    #[test]
    fn frames_arrive_whole_whatever_the_chunking() {
        let mut t = TcpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = t.local_addr().unwrap();
        let frames: Vec<Vec<u8>> = (0..50u64)
            .map(|i| {
                encode_frame(
                    FrameType::Stats,
                    i,
                    &vec![i as u8; (i as usize * 997) % 100_000],
                )
            })
            .collect();
        let all: Vec<u8> = frames.concat();
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for chunk in all.chunks(7919) {
                s.write_all(chunk).unwrap();
            }
        });
        let mut src = loop {
            if let Some(s) = t.accept().unwrap() {
                break s;
            }
        };
        let mut got = Vec::new();
        loop {
            match src.next_frame().unwrap() {
                Next::Frame(f) => got.push(f.to_vec()),
                Next::Idle => {}
                Next::Closed => break,
            }
        }
        writer.join().unwrap();
        assert_eq!(got, frames);
    }

    /// A peer that declares a large frame and sends little of it costs little memory.
    #[test]
    fn memory_follows_the_bytes_sent_not_the_length_declared() {
        let mut t = TcpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = t.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        let mut head = encode_frame(FrameType::Stats, 0, &vec![0; 32 << 20]);
        head.truncate(100_000);
        s.write_all(&head).unwrap();
        let mut src = loop {
            if let Some(s) = t.accept().unwrap() {
                break s;
            }
        };
        // As after a hello: frames up to the protocol's cap.
        src.set_max_frame(telemetry::protocol::MAX_FRAME);
        for _ in 0..5 {
            assert!(matches!(src.next_frame().unwrap(), Next::Idle));
        }
        assert_eq!(src.end, 100_000, "everything sent was read");
        assert!(src.buf.len() <= 1 << 18, "{} bytes held", src.buf.len());
    }

    /// The error `src` ends in (panics on a frame, a close, or none within a minute).
    fn first_error(src: &mut TcpSource) -> SourceError {
        let t0 = Instant::now();
        loop {
            match src.next_frame() {
                Err(e) => break e,
                Ok(Next::Idle) => assert!(t0.elapsed() < Duration::from_secs(60), "no error"),
                Ok(other) => panic!("{other:?}"),
            }
        }
    }

    /// The source that `addr`'s listener accepts next.
    fn accepted(t: &mut TcpTransport) -> TcpSource {
        loop {
            if let Some(s) = t.accept().unwrap() {
                break s;
            }
        }
    }

    /// Before a hello, a frame longer than any hello is refused at once (a peer that
    /// never says hello made the sink hold up to 64 MiB for it); after one, a large frame
    /// is taken and its memory given back once it is read.
    #[test]
    fn frames_are_bounded_by_the_hello_and_large_ones_give_their_memory_back() {
        let mut t = TcpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = t.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        let big = encode_frame(FrameType::Stats, 0, &vec![7; 8 << 20]);
        s.write_all(&big[..4]).unwrap();
        let mut src = accepted(&mut t);
        let e = first_error(&mut src);
        assert!(matches!(e, SourceError::Framing(_)), "{e}");
        assert!(src.buf.len() <= BUFFER);

        let mut s = TcpStream::connect(addr).unwrap();
        let small = encode_frame(FrameType::Stats, 1, &[1; 100]);
        let writer = std::thread::spawn(move || {
            s.write_all(&big).unwrap();
            s.write_all(&small).unwrap();
        });
        let mut src = accepted(&mut t);
        src.set_max_frame(telemetry::protocol::MAX_FRAME);
        let mut sizes = Vec::new();
        while sizes.len() < 2 {
            if let Next::Frame(f) = src.next_frame().unwrap() {
                sizes.push(f.len());
            }
        }
        writer.join().unwrap();
        assert_eq!(sizes, [(8 << 20) + 16, 116]);
        // Asked once more (nothing left): the buffer stays while large frames may come,
        // and goes back to its usual size once none has for a while.
        let idle =
            |src: &mut TcpSource| matches!(src.next_frame().unwrap(), Next::Idle | Next::Closed);
        assert!(idle(&mut src));
        assert!(src.buf.len() > SHRINK_ABOVE);
        src.large_at -= SHRINK_AFTER;
        assert!(idle(&mut src));
        assert_eq!(src.buf.len(), BUFFER);
    }

    /// A peer that sends a frame a byte at a time, never stopping for a whole poll, still
    /// hands its reader back control every poll (it held it for good: no deadline, no stop,
    /// no shutdown).
    #[test]
    fn a_peer_that_trickles_does_not_hold_its_reader() {
        let mut t = TcpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = t.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&(1000u32).to_be_bytes()).unwrap();
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if s.write_all(&[0]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let mut src = accepted(&mut t);
        let mut idle = 0;
        let t0 = std::time::Instant::now();
        while idle < 5 && t0.elapsed() < Duration::from_secs(60) {
            match src.next_frame().unwrap() {
                Next::Idle => idle += 1,
                other => panic!("{other:?}"),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(src);
        writer.join().unwrap();
        assert_eq!(idle, 5, "next_frame returned {idle} times in a minute");
    }

    #[test]
    fn a_length_beyond_the_cap_is_a_framing_error() {
        let mut t = TcpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = t.local_addr().unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&u32::MAX.to_be_bytes()).unwrap();
        let mut src = loop {
            if let Some(s) = t.accept().unwrap() {
                break s;
            }
        };
        let e = first_error(&mut src);
        assert!(matches!(e, SourceError::Framing(_)), "{e}");
    }
}
