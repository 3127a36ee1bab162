//! Measurement files for offline detection.
//!
//! - `csv`: a header naming at least `seq`, `send_time` (seconds) and `delay_ms` (in any
//!   order; other columns are ignored), then one row per received packet in arrival order;
//!   quoted fields, CRLF line ends, a byte-order mark, blank lines and `#` comment lines
//!   are accepted (as spreadsheets and scripts write CSV).
//! - `owamp`: the per-packet text of `owstats -v -U` (or `owping -v -U`): lines
//!   `seq_no=N delay=D UNIT (sync, err=E UNIT) sent=S recv=R` and `seq_no=N *LOST*`; other
//!   lines (headers, summaries) are skipped. The `-U` timestamps are needed: windows are cut
//!   by send time; an `(unsync)` record, printed without one, gets one from its neighbours.
//!   `twping -v -U` records give the round trip (`delay=`).
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
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let line_of = |pos: Option<&csv::Position>| pos.map_or(1, |p| line_at(text, p.byte()));
    let unreadable = |e: csv::Error| InputError {
        line: line_of(e.position()),
        reason: format!("not readable as CSV: {e}"),
    };
    // Rows whose every field is empty (blank lines, lines of commas) are skipped.
    let mut rows = reader
        .records()
        .filter(|r| r.as_ref().map_or(true, |r| r.iter().any(|f| !f.is_empty())));
    let header = match rows.next() {
        Some(r) => r.map_err(unreadable)?,
        None => {
            return Err(InputError {
                line: 1,
                reason: "empty file: want a header `seq,send_time,delay_ms`".into(),
            });
        }
    };
    let hl = line_of(header.position());
    let col = |name: &str| {
        header
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| InputError {
                line: hl,
                reason: format!("the header has no `{name}` column (want seq,send_time,delay_ms)"),
            })
    };
    let (cs, ct, cd) = (col("seq")?, col("send_time")?, col("delay_ms")?);
    let mut out = Vec::new();
    for row in rows {
        let f = row.map_err(unreadable)?;
        let line = line_of(f.position());
        let field = |c: usize, what: &str| {
            f.get(c).ok_or_else(|| InputError {
                line,
                reason: format!("no `{what}` field"),
            })
        };
        let bad = |what: &str, v: &str| InputError {
            line,
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

/// The line (1-based) of the CSV record the reader places at byte `at`: the reader's
/// position is where it began looking for the record, so the blank and comment lines it
/// skipped first are skipped here too. Called only for errors (it counts from the start).
fn line_at(text: &str, at: u64) -> usize {
    let bytes = text.as_bytes();
    let mut i = usize::try_from(at).map_or(bytes.len(), |a| a.min(bytes.len()));
    loop {
        while matches!(bytes.get(i), Some(b'\r' | b'\n')) {
            i += 1;
        }
        if bytes.get(i) != Some(&b'#') {
            break;
        }
        i = bytes[i..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |n| i + n);
    }
    1 + bytes[..i].iter().filter(|&&b| b == b'\n').count()
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
    let mut records: Vec<Record> = Vec::new();
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
            } else if let Some(v) = t.strip_prefix("sent=")
                && sent.is_none()
            {
                sent = Some(
                    v.parse()
                        .map_err(|_| err(format!("`{v}` is not a send time")))?,
                );
            }
        }
        let (Some(d), Some(u)) = (delay, unit) else {
            return Err(err("no `delay=` field".into()));
        };
        if !(sent.is_none_or(f64::is_finite) && d.is_finite()) {
            return Err(err("a time that is not a number".into()));
        }
        // With -U, owstats prints send times only for records whose clocks were in sync; an
        // `(unsync)` record has none, and gets one from its neighbours below.
        if sent.is_none() && !l.contains("(unsync)") {
            return Err(err(
                "no `sent=` time (run owstats with -v -U so that records carry send times)".into(),
            ));
        }
        records.push(Record {
            seq,
            sent,
            delay_ms: d * u,
            line: i + 1,
        });
    }
    with_send_times(&records)
}

/// A received owamp record, before every record has a send time.
struct Record {
    seq: u64,
    sent: Option<f64>,
    delay_ms: f64,
    line: usize,
}

/// The records as samples, each with its send time: its own, or for a record without one
/// (clocks out of sync) one on the line through the two nearest records by sequence number
/// that have one (probes leave on a schedule): between them, or past the first or last.
/// A file in which no record has a send time is refused.
fn with_send_times(records: &[Record]) -> Result<Vec<Sample>, InputError> {
    // The known (sequence number, send time) points, one per sequence number, in order.
    let mut known: Vec<(u64, f64)> = records
        .iter()
        .filter_map(|r| Some((r.seq, r.sent?)))
        .collect();
    known.sort_by_key(|k| k.0);
    known.dedup_by_key(|k| k.0);
    let send_of = |seq: u64| -> Option<f64> {
        let n = known.len();
        if n < 2 {
            return known.first().map(|k| k.1);
        }
        let i = known.partition_point(|k| k.0 < seq).clamp(1, n - 1);
        let ((s0, t0), (s1, t1)) = (known[i - 1], known[i]);
        Some(t0 + (t1 - t0) * (seq as f64 - s0 as f64) / (s1 as f64 - s0 as f64))
    };
    records
        .iter()
        .map(|r| {
            let send = r
                .sent
                .or_else(|| send_of(r.seq))
                .ok_or_else(|| InputError {
                    line: r.line,
                    reason: "no record has a send time: the clocks were never in sync \
                         (`(unsync)`), and windows are cut by send time"
                        .into(),
                })?;
            Ok(Sample {
                seq: Some(r.seq),
                send,
                delay_ms: r.delay_ms,
            })
        })
        .collect()
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
    fn csv_as_spreadsheets_and_scripts_write_it() {
        // A byte-order mark, quoted names and fields, CRLF line ends, a comment line, a
        // blank line and a row of empty fields.
        let text = "\u{feff}\"seq\",\"send_time\",\"delay_ms\",\"note\"\r\n\
# probes from host a\r\n\
0, 10.0 ,\"1.25\",\"first, then more\"\r\n\
\r\n\
,,,\r\n\
1,10.1,2.5,\r\n";
        let s = read(text, Format::Csv).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].seq, s[0].send, s[0].delay_ms), (Some(0), 10.0, 1.25));
        assert_eq!((s[1].seq, s[1].send, s[1].delay_ms), (Some(1), 10.1, 2.5));
        // Errors still name the file's line, counted as an editor counts them.
        let e = read(
            "seq,send_time,delay_ms\r\n\r\n1,2,3\r\n4,5,oops\r\n",
            Format::Csv,
        )
        .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.reason.contains("oops"), "{e}");
        let e = read("seq,send_time,delay_ms\n1,2\n", Format::Csv).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("delay_ms"), "{e}");
        // A quote left open takes the lines after it into its field: refused, not skipped.
        let e = read("seq,send_time,delay_ms\n1,2,\"3\n4,5,6\n", Format::Csv).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn owamp_unsync_records_take_send_times_from_their_neighbours() {
        // owstats -v -U prints no send time for a record whose clocks were out of sync.
        let text = "seq_no=0 delay=1.000000e+00 ms (sync, err=0.02 ms) sent=100.000000 recv=100.001000\n\
seq_no=1          delay=1.5 ms\t(unsync)\n\
seq_no=2          *LOST*\n\
seq_no=3          delay=2 ms\t(unsync)\n\
seq_no=4 delay=1.000000e+00 ms (sync, err=0.02 ms) sent=100.400000 recv=100.401000\n\
seq_no=5 delay=1.000000e+00 ms (sync, err=0.02 ms) sent=100.500000 recv=100.501000\n\
seq_no=7          delay=3 ms\t(unsync)\n";
        let s = read(text, Format::Owamp).unwrap();
        let got: Vec<(u64, f64, f64)> = s
            .iter()
            .map(|x| (x.seq.unwrap(), x.send, x.delay_ms))
            .collect();
        let want = [
            (0, 100.0, 1.0),
            (1, 100.1, 1.5),
            (3, 100.3, 2.0),
            (4, 100.4, 1.0),
            (5, 100.5, 1.0),
            (7, 100.7, 3.0),
        ];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.0, w.0);
            assert!((g.1 - w.1).abs() < 1e-9, "{g:?} against {w:?}");
            assert_eq!(g.2, w.2);
        }
        // Before the first record with a send time, the first two give the rate.
        let s = read(
            "seq_no=0 delay=1 ms (unsync)\n\
             seq_no=2 delay=1 ms (sync, err=1 ms) sent=10.2 recv=10.3\n\
             seq_no=3 delay=1 ms (sync, err=1 ms) sent=10.3 recv=10.4\n",
            Format::Owamp,
        )
        .unwrap();
        assert!((s[0].send - 10.0).abs() < 1e-9, "{:?}", s[0]);
        // No send time anywhere: refused, naming the first such record.
        let e = read(
            "SID:\tabc\nseq_no=0 delay=1 ms (unsync)\nseq_no=1 delay=1 ms (unsync)\n",
            Format::Owamp,
        )
        .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("sync"), "{e}");
    }

    #[test]
    fn twping_records_give_the_round_trip() {
        let text = "--- twping statistics from [a]:8852 to [b]:8933 ---\n\
seq_no=0 fwd_delay=4.000000e-01 ms bck_delay=5.000000e-01 ms delay=9.000000e-01 ms proc_delay=1.000000e-02 ms (err=0.05 ms) sent=200.000000 recv=200.000400 reflected=200.000410 recv=200.000910\n";
        let s = read(text, Format::Owamp).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].send, 200.0);
        assert!((s[0].delay_ms - 0.9).abs() < 1e-12, "{:?}", s[0]);
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
