//! The `csv` format: a header naming `seq`, `send_time` and `delay_ms`, one row per
//! received packet.

use super::InputError;
use crate::detect::Sample;

pub(super) fn read(text: &str) -> Result<Vec<Sample>, InputError> {
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
        // Worked out only for an error: it counts lines from the start.
        let line = || line_of(f.position());
        let field = |c: usize, what: &str| {
            f.get(c).ok_or_else(|| InputError {
                line: line(),
                reason: format!("no `{what}` field"),
            })
        };
        let bad = |what: &str, v: &str| InputError {
            line: line(),
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

#[cfg(test)]
mod tests {
    use super::super::{Format, read};

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
}
