//! Measurement files for offline detection.
//!
//! - `csv`: a header naming at least `seq`, `send_time` (seconds) and `delay_ms` (in any
//!   order; other columns are ignored), then one row per received packet in arrival order.
//! - `owamp`: the per-packet text of `owstats -v -U` (or `owping -v -U`): lines
//!   `seq_no=N delay=D UNIT (sync, err=E UNIT) sent=S recv=R` and `seq_no=N *LOST*`; other
//!   lines (headers, summaries) are skipped. The `-U` timestamps are needed: windows are cut
//!   by send time.
//!
//! A malformed line is an error that names it.

use super::Sample;

/// A file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header.
    Csv,
    /// `owstats -v -U` text.
    Owamp,
}

impl Format {
    /// `csv` or `owamp`.
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "csv" => Ok(Format::Csv),
            "owamp" => Ok(Format::Owamp),
            _ => Err(format!("`{s}` is not a format (csv or owamp)")),
        }
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct InputError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads `text` in `format`: the received packets in arrival order.
pub fn read(text: &str, format: Format) -> Result<Vec<Sample>, InputError> {
    match format {
        Format::Csv => read_csv(text),
        Format::Owamp => read_owamp(text),
    }
}

fn read_csv(text: &str) -> Result<Vec<Sample>, InputError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hl, header)) = lines.next() else {
        return Err(InputError {
            line: 1,
            reason: "empty file: want a header `seq,send_time,delay_ms`".into(),
        });
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| InputError {
                line: hl + 1,
                reason: format!("the header has no `{name}` column (want seq,send_time,delay_ms)"),
            })
    };
    let (cs, ct, cd) = (col("seq")?, col("send_time")?, col("delay_ms")?);
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let field = |c: usize, what: &str| {
            f.get(c).copied().ok_or_else(|| InputError {
                line: i + 1,
                reason: format!("no `{what}` field"),
            })
        };
        let bad = |what: &str, v: &str| InputError {
            line: i + 1,
            reason: format!("`{v}` is not a valid {what}"),
        };
        let seq_s = field(cs, "seq")?;
        let seq: u64 = seq_s.parse().map_err(|_| bad("sequence number", seq_s))?;
        let t_s = field(ct, "send_time")?;
        let send: f64 = t_s
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| bad("send time (seconds)", t_s))?;
        let d_s = field(cd, "delay_ms")?;
        let delay_ms: f64 = d_s
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| bad("delay (ms)", d_s))?;
        out.push(Sample {
            seq: Some(seq),
            send,
            delay_ms,
        });
    }
    Ok(out)
}

fn unit_ms(u: &str) -> Option<f64> {
    match u {
        "ns" => Some(1e-6),
        "us" => Some(1e-3),
        "ms" => Some(1.0),
        "s" => Some(1e3),
        _ => None,
    }
}

fn read_owamp(text: &str) -> Result<Vec<Sample>, InputError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        let Some(rest) = l.strip_prefix("seq_no=") else {
            continue;
        };
        let err = |reason: String| InputError {
            line: i + 1,
            reason,
        };
        let mut words = rest.split_whitespace();
        let seq_s = words.next().unwrap_or("");
        let seq: u64 = seq_s
            .parse()
            .map_err(|_| err(format!("`{seq_s}` is not a sequence number")))?;
        if l.contains("*LOST*") {
            continue; // lost: its number is missing from the received ones
        }
        let mut delay: Option<f64> = None;
        let mut unit: Option<f64> = None;
        let mut sent: Option<f64> = None;
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        for (k, t) in tokens.iter().enumerate() {
            if let Some(v) = t.strip_prefix("delay=") {
                delay = Some(
                    v.parse()
                        .map_err(|_| err(format!("`{v}` is not a delay")))?,
                );
                let u = tokens.get(k + 1).copied().unwrap_or("");
                unit = Some(unit_ms(u).ok_or_else(|| err(format!("`{u}` is not a unit")))?);
            } else if let Some(v) = t.strip_prefix("sent=") {
                sent = Some(
                    v.parse()
                        .map_err(|_| err(format!("`{v}` is not a send time")))?,
                );
            }
        }
        let (Some(d), Some(u)) = (delay, unit) else {
            return Err(err("no `delay=` field".into()));
        };
        let Some(send) = sent else {
            return Err(err(
                "no `sent=` time (run owstats with -v -U so that records carry send times)".into(),
            ));
        };
        if !(send.is_finite() && d.is_finite()) {
            return Err(err("a time that is not a number".into()));
        }
        out.push(Sample {
            seq: Some(seq),
            send,
            delay_ms: d * u,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_extra_columns_in_any_order() {
        let s = read(
            "host,delay_ms,seq,send_time\nA,1.5,0,100.0\n\nA,2.5,2,100.2\n",
            Format::Csv,
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].seq, Some(2));
        assert_eq!(s[1].send, 100.2);
        assert_eq!(s[1].delay_ms, 2.5);
        let e = read("seq,send_time,delay_ms\n1,2,3\n4,x,6\n", Format::Csv).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.reason.contains("send time"), "{e}");
        let e = read("seq,delay_ms\n", Format::Csv).unwrap_err();
        assert!(e.to_string().contains("send_time"), "{e}");
        assert!(read("", Format::Csv).is_err());
    }

    #[test]
    fn owamp_records_and_lost_lines() {
        let text = "--- owping statistics from [a]:8852 to [b]:8933 ---\n\
SID:\tc0a80001d8b2\n\
seq_no=0 delay=1.532000e+00 ms (sync, err=0.0191 ms) sent=1500000000.100000 recv=1500000000.101532\n\
seq_no=1          *LOST*\n\
seq_no=2 delay=2.100000e+03 us (sync, err=19.1 us) sent=1500000000.300000 recv=1500000000.302100\n\
10 sent, 1 lost (10.000%), 0 duplicates\n";
        let s = read(text, Format::Owamp).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].seq, Some(0));
        assert!((s[0].delay_ms - 1.532).abs() < 1e-9);
        assert!((s[1].delay_ms - 2.1).abs() < 1e-9);
        assert_eq!(s[1].send, 1_500_000_000.3);
        let e = read(
            "seq_no=3 delay=1.2 ms\t(sync, err=0.02 ms)\n",
            Format::Owamp,
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.reason.contains("-U"), "{e}");
        assert!(read("seq_no=x delay=1 ms sent=1\n", Format::Owamp).is_err());
    }
}
