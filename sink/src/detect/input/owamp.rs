//! The `owamp` format: the per-packet text of `owstats -v -U`, `owping -v -U` and
//! `twping -v -U`. owping tests both directions unless told `-t` or `-f`, and prints each
//! as a session of its own (`--- owping statistics from A to B ---`, `SID:`, its records):
//! each session is a series of its own.

use super::{InputError, Series};
use crate::detect::Sample;

fn unit_ms(u: &str) -> Option<f64> {
    match u {
        "ns" => Some(1e-6),
        "us" => Some(1e-3),
        "ms" => Some(1.0),
        "s" => Some(1e3),
        _ => None,
    }
}

/// The file's sessions, each with its name (`from A to B`, else its SID) and samples.
pub(super) fn read(text: &str) -> Result<Vec<Series>, InputError> {
    let mut out = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut name: Option<String> = None;
    let mut finish = |records: &mut Vec<Record>, name: &mut Option<String>| {
        if records.is_empty() {
            return Ok(());
        }
        let samples = with_send_times(records)?;
        out.push(Series {
            name: name.take(),
            samples,
        });
        records.clear();
        Ok::<(), InputError>(())
    };
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        // A session's header: the records so far were another session's.
        if l.starts_with("---") && l.contains(" statistics ") {
            finish(&mut records, &mut name)?;
            name = l
                .split_once(" statistics ")
                .map(|(_, r)| r.trim_end_matches('-').trim().to_owned());
            continue;
        }
        if let Some(sid) = l.strip_prefix("SID:") {
            finish(&mut records, &mut name)?;
            name.get_or_insert_with(|| format!("SID {}", sid.trim()));
            continue;
        }
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
        // The delay in ms, too, is a number (1e308 s is not).
        if !(sent.is_none_or(f64::is_finite) && d.is_finite() && (d * u).is_finite()) {
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
    finish(&mut records, &mut name)?;
    Ok(out)
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
            if !send.is_finite() {
                return Err(InputError {
                    line: r.line,
                    reason: "the send time its neighbours give it is not a number".into(),
                });
            }
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
    use super::super::{Format, assert_samples, read};

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
        let want = [
            (0, 100.0, 1.0),
            (1, 100.1, 1.5),
            (3, 100.3, 2.0),
            (4, 100.4, 1.0),
            (5, 100.5, 1.0),
            (7, 100.7, 3.0),
        ];
        assert_samples(&s, &want, 1e-9);
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

    /// owping's default output: both directions, one session each; read as two series
    /// (merged, each direction's records hid the other's losses), named by their header.
    #[test]
    fn both_directions_are_two_series() {
        use super::super::read_series;
        let text = "--- owping statistics from [a]:8852 to [b]:8933 ---\n\
SID:\tc0a80001d8b2\n\
seq_no=0 delay=1 ms (sync, err=0.02 ms) sent=100.0 recv=100.001\n\
seq_no=1 delay=1 ms (sync, err=0.02 ms) sent=100.1 recv=100.101\n\
2 sent, 0 lost (0.000%), 0 duplicates\n\
\n\
--- owping statistics from [b]:8934 to [a]:8853 ---\n\
SID:\tc0a80002d8b3\n\
seq_no=0 delay=2 ms (sync, err=0.02 ms) sent=100.0 recv=100.002\n\
seq_no=1          *LOST*\n\
seq_no=2 delay=2 ms (sync, err=0.02 ms) sent=100.2 recv=100.202\n";
        let all = read_series(text, Format::Owamp).unwrap();
        let got: Vec<(Option<&str>, usize)> = all
            .iter()
            .map(|s| (s.name.as_deref(), s.samples.len()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("from [a]:8852 to [b]:8933"), 2),
                (Some("from [b]:8934 to [a]:8853"), 2)
            ]
        );
        assert_eq!(all[1].samples[1].seq, Some(2));
        let e = read(text, Format::Owamp).unwrap_err();
        assert!(e.reason.contains("2 series"), "{e}");
        // SID lines alone part sessions too.
        let sids = "SID:\ta\nseq_no=0 delay=1 ms (sync, err=0.02 ms) sent=1.0 recv=1.001\nSID:\tb\nseq_no=0 delay=1 ms (sync, err=0.02 ms) sent=1.0 recv=1.001\n";
        let all = read_series(sids, Format::Owamp).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].name.as_deref(), Some("SID b"));
    }

    /// A time that is no number, or a delay that becomes none in milliseconds, is refused
    /// with its line (it was dropped without a word, and the file read as empty).
    #[test]
    fn times_that_are_no_number_are_refused() {
        for (record, line) in [
            (
                "seq_no=0 delay=1e308 s (sync, err=0.02 ms) sent=100.0 recv=1",
                1,
            ),
            (
                "seq_no=0 delay=inf ms (sync, err=0.02 ms) sent=100.0 recv=1",
                1,
            ),
            ("seq_no=0 delay=1 ms (sync, err=0.02 ms) sent=nan recv=1", 1),
        ] {
            let text =
                format!("{record}\nseq_no=1 delay=1 ms (sync, err=0.02 ms) sent=100.1 recv=1\n");
            let e = read(&text, Format::Owamp).unwrap_err();
            assert_eq!(e.line, line, "{record}: {e}");
            assert!(e.reason.contains("not a number"), "{record}: {e}");
        }
        // Send times so far apart that the one between them is no number.
        let e = read(
            "seq_no=0 delay=1 ms (sync, err=1 ms) sent=-1e308 recv=1\n\
             seq_no=1 delay=1 ms (unsync)\n\
             seq_no=2 delay=1 ms (sync, err=1 ms) sent=1e308 recv=1\n",
            Format::Owamp,
        )
        .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("not a number"), "{e}");
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
