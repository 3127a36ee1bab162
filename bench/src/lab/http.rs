//! A plain HTTP/1.1 GET over loopback, for reading the sink's API (the lab's status line and
//! report, and the tests).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// GETs `path` from `addr`: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("GET {path}: not an HTTP response"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("GET {path}: no status"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body).ok_or_else(|| anyhow::anyhow!("GET {path}: bad chunked body"))?
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// GETs `path` and parses the JSON body of a 200 response.
pub fn get_json(addr: SocketAddr, path: &str) -> anyhow::Result<serde_json::Value> {
    let (status, body) = get(addr, path)?;
    if status != 200 {
        anyhow::bail!("GET {path}: status {status}: {body}");
    }
    Ok(serde_json::from_str(&body)?)
}

fn dechunk(mut s: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n")?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        if n == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..n)?);
        s = rest.get(n + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            super::dechunk("4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n").as_deref(),
            Some("abcdefg")
        );
        assert_eq!(super::dechunk("9\r\nabc"), None);
    }
}
