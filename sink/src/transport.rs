//! Where frames come from. The sink decodes frames; how they arrive is a transport: TCP from
//! each switch now. A message bus later (partitions keyed by flow hash for digests, by switch
//! and epoch for flowsets) is another implementation of these two traits, not a rewrite: each
//! partition is a [`FrameSource`] whose frames the same ingest code decodes.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use telemetry::protocol::{ProtocolError, frame_len};

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

/// How long a read or accept waits before reporting idle.
const POLL: Duration = Duration::from_millis(100);

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
                    buf: vec![0; 1 << 16],
                    start: 0,
                    end: 0,
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
}

impl FrameSource for TcpSource {
    fn peer(&self) -> String {
        self.peer.to_string()
    }

    fn next_frame(&mut self) -> Result<Next<'_>, SourceError> {
        loop {
            if let Some(len) = frame_len(&self.buf[self.start..self.end])?
                && self.end - self.start >= len
            {
                let at = self.start;
                self.start += len;
                return Ok(Next::Frame(&self.buf[at..at + len]));
            }
            // Make room: move what is left to the front; for a large frame (its length was
            // checked against the protocol's cap) grow as its bytes arrive, doubling, so
            // that memory follows what a peer sent, not what it declared.
            let need = frame_len(&self.buf[self.start..self.end])?.unwrap_or(4);
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() && self.buf.len() < need {
                let grown = need.min(self.buf.len().saturating_mul(2));
                self.buf.resize(grown, 0);
            }
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(Next::Closed),
                Ok(n) => self.end += n,
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
        for _ in 0..5 {
            assert!(matches!(src.next_frame().unwrap(), Next::Idle));
        }
        assert_eq!(src.end, 100_000, "everything sent was read");
        assert!(src.buf.len() <= 1 << 18, "{} bytes held", src.buf.len());
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
        let e = loop {
            match src.next_frame() {
                Err(e) => break e,
                Ok(Next::Idle) => {}
                Ok(other) => panic!("{other:?}"),
            }
        };
        assert!(matches!(e, SourceError::Framing(_)), "{e}");
    }
}
