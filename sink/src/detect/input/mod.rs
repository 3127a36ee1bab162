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
    /// `csv`, `owamp` or `ping`.
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "csv" => Ok(Format::Csv),
            "owamp" => Ok(Format::Owamp),
            "ping" => Ok(Format::Ping),
            _ => Err(format!("`{s}` is not a format (csv, owamp or ping)")),
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
        Format::Csv => csv_rows::read(text),
        Format::Owamp => owamp::read(text),
        Format::Ping => ping::read(text),
    }
}
