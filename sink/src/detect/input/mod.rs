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
//! - `ping`: the output of `ping -D` (iputils): each reply's sequence number, round trip
//!   and send time (its `[UNIX time]` stamp less the round trip); lost requests are missing
//!   sequence numbers.
//!
//! A malformed line is an error that names it.

mod csv_rows;
mod owamp;
mod ping;

use super::Sample;

/// A file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header.
    Csv,
    /// `owstats -v -U` text.
    Owamp,
    /// `ping -D` output.
    Ping,
}

impl Format {
    /// `csv`, `owamp` or `ping`; `auto` (None): [`Format::guess`] from the text.
    pub fn parse(s: &str) -> Result<Option<Format>, String> {
        match s {
            "auto" => Ok(None),
            "csv" => Ok(Some(Format::Csv)),
            "owamp" => Ok(Some(Format::Owamp)),
            "ping" => Ok(Some(Format::Ping)),
            _ => Err(format!("`{s}` is not a format (auto, csv, owamp or ping)")),
        }
    }

    /// The format of `text` by its first lines: owamp when a line starts with `seq_no=`,
    /// ping when one is ping's header (`PING host ...`) or a reply (`... bytes from ...
    /// icmp_seq=...`), else CSV (whose errors then say what a CSV file needs).
    pub fn guess(text: &str) -> Format {
        for l in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .take(100)
        {
            if l.starts_with("seq_no=") {
                return Format::Owamp;
            }
            let reply = l.contains(" bytes from ")
                && (l.contains(" icmp_seq=") || l.contains(" icmp_req="));
            let header = l.starts_with("PING ")
                && (l.contains(" bytes of data") || l.contains(" data bytes"));
            if reply || header {
                return Format::Ping;
            }
        }
        Format::Csv
    }

    /// What the format reads, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::Owamp => "owamp text",
            Format::Ping => "ping -D output",
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
/// One series of measurements in a file: an owping session (a file may hold one per
/// direction), else the whole file.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its name, where the file gives one (`from A to B`).
    pub name: Option<String>,
    /// Its samples, in file order.
    pub samples: Vec<Sample>,
}

/// Reads every series of `text`.
pub fn read_series(text: &str, format: Format) -> Result<Vec<Series>, InputError> {
    let whole = |samples| {
        vec![Series {
            name: None,
            samples,
        }]
    };
    Ok(match format {
        Format::Csv => whole(csv_rows::read(text)?),
        Format::Owamp => owamp::read(text)?,
        Format::Ping => whole(ping::read(text)?),
    })
}

/// Reads `text` as one series (a file of several, such as owping's two directions, is
/// refused: [`read_series`] reads each).
pub fn read(text: &str, format: Format) -> Result<Vec<Sample>, InputError> {
    let mut all = read_series(text, format)?;
    match all.len() {
        0 => Ok(Vec::new()),
        1 => Ok(all.remove(0).samples),
        n => Err(InputError {
            line: 1,
            reason: format!("the file holds {n} series (owping sessions), not one"),
        }),
    }
}

/// Asserts that `got` are the samples `want` (sequence number, send time, delay in ms):
/// numbers and delays exactly, send times to within `tolerance` seconds.
#[cfg(test)]
fn assert_samples(got: &[Sample], want: &[(u64, f64, f64)], tolerance: f64) {
    let got: Vec<(u64, f64, f64)> = got
        .iter()
        .map(|x| (x.seq.expect("a sequence number"), x.send, x.delay_ms))
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0, g.2), (w.0, w.2), "{g:?} against {w:?}");
        assert!((g.1 - w.1).abs() < tolerance, "{g:?} against {w:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn formats_are_told_apart_by_their_first_lines() {
        let cases = [
            ("seq,send_time,delay_ms\n1,2,3\n", Format::Csv),
            (
                "# probes\n\"seq\",\"send_time\",\"delay_ms\"\n",
                Format::Csv,
            ),
            ("", Format::Csv),
            (
                "--- owping statistics ---\nSID:\tabc\nseq_no=0 delay=1 ms sent=1\n",
                Format::Owamp,
            ),
            (
                "PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n",
                Format::Ping,
            ),
            ("PING ::1 (::1) 56 data bytes\n", Format::Ping),
            (
                "[1.5] 64 bytes from ::1: icmp_seq=1 ttl=64 time=0.1 ms\n",
                Format::Ping,
            ),
            (
                "64 bytes from a: icmp_req=1 ttl=64 time=0.1 ms\n",
                Format::Ping,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Format::guess(text), want, "{text:?}");
        }
        assert_eq!(Format::parse("auto"), Ok(None));
        assert_eq!(Format::parse("ping"), Ok(Some(Format::Ping)));
        assert!(
            Format::parse("pcap")
                .unwrap_err()
                .contains("auto, csv, owamp or ping")
        );
    }
}
