//! The `ping` format: the output of `ping -D` (iputils, Linux), whose reply lines carry the
//! Unix time they were printed at:
//!
//! ```text
//! [1733312345.123456] 64 bytes from 10.0.0.1: icmp_seq=7 ttl=64 time=0.045 ms
//! ```
//!
//! Each reply is a received packet: its sequence number (`icmp_seq=`, or `icmp_req=` and
//! `seq=` as older and smaller pings print it; 16 bits on the wire, so it is unwrapped past
//! 65535 by the send schedule), its round trip (`time=`, ms) and its send time, the stamp less the round trip.
//! Duplicates (`(DUP!)`), `no answer yet` (`-O`), ICMP errors (`From ... Destination Host
//! Unreachable`), headers and statistics are skipped: a request without a reply between
//! two that have one is a missing sequence number, a lost packet (requests lost before the
//! first reply or after the last are not seen). Without `-D` a reply has no time of its own
//! and the file is refused with that advice (windows are cut by send time), as is a file
//! with no reply that has a round trip.

use super::InputError;
use crate::detect::Sample;

/// Sequence numbers wrap here.
const SEQ_SPAN: i64 = 1 << 16;

pub(super) fn read(text: &str) -> Result<Vec<Sample>, InputError> {
    let mut replies: Vec<(u16, f64, f64)> = Vec::new();
    // The first reply line without a round trip (`ping -s` below 16 bytes, or a locale
    // whose words differ), for the error when no reply has one.
    let mut untimed: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let err = |reason: String| InputError {
            line: i + 1,
            reason,
        };
        let l = line.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        let (stamp, rest) = match l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((s, rest)) => (Some(s), rest.trim_start()),
            None => (None, l),
        };
        // A reply: "N bytes from ADDR: ... time=T ms"; anything else is skipped, and so is
        // a duplicate (iputils may add more notes after `(DUP!)`).
        if !rest.contains(" bytes from ") || rest.contains("(DUP!)") {
            continue;
        }
        let field = |names: &[&str]| {
            rest.split_whitespace()
                .find_map(|w| names.iter().find_map(|n| w.strip_prefix(n)))
        };
        let (Some(seq_s), Some(time_s)) = (
            field(&["icmp_seq=", "icmp_req=", "seq="]),
            field(&["time="]),
        ) else {
            untimed.get_or_insert(i + 1);
            continue;
        };
        let seq: u16 = seq_s
            .parse()
            .map_err(|_| err(format!("`{seq_s}` is not a sequence number (0 to 65535)")))?;
        let rtt_ms: f64 = time_s
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| err(format!("`{time_s}` is not a round-trip time (ms)")))?;
        let Some(stamp) = stamp else {
            return Err(err(
                "a reply without a `[UNIX time]` stamp: run ping with -D so that replies carry \
                 the time they arrived"
                    .into(),
            ));
        };
        let at: f64 = stamp
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite())
            .ok_or_else(|| err(format!("`[{stamp}]` is not a Unix time")))?;
        replies.push((seq, at - rtt_ms / 1e3, rtt_ms));
    }
    if replies.is_empty() {
        return Err(InputError {
            line: untimed.unwrap_or(1),
            reason: match untimed {
                Some(_) => "replies without a round trip (`time=`): ping prints none for \
                            fewer than 16 data bytes (-s), nor in other languages (run it \
                            with LC_ALL=C)"
                    .into(),
                None => {
                    "no ping reply (`[STAMP] N bytes from ADDR: icmp_seq=S ... time=T ms`)".into()
                }
            },
        });
    }
    let seqs = unwrapped(&replies);
    Ok(replies
        .iter()
        .zip(seqs)
        .map(|(&(_, send, delay_ms), seq)| Sample {
            seq: Some(seq),
            send,
            delay_ms,
        })
        .collect())
}

/// The replies' 16-bit sequence numbers (with their send times) unwrapped: each becomes the
/// number in its class modulo 65536 nearest where the send schedule puts it (the highest
/// number so far moved on by the time since its send at the run's average spacing; before
/// two replies give a spacing, nearest the highest), so that neither a late reply nor an
/// outage of more than 32768 requests is misplaced. Numbers stay as printed until a wrap,
/// unless a late reply from before the first falls below 0: then all move up alike.
fn unwrapped(replies: &[(u16, f64, f64)]) -> Vec<u64> {
    let mut out: Vec<i64> = Vec::with_capacity(replies.len());
    // The first reply and the one of the highest number so far: (number, send time).
    let mut first: Option<(i64, f64)> = None;
    let mut highest: Option<(i64, f64)> = None;
    for &(seq, send, _) in replies {
        let s = i64::from(seq);
        let n = match (first, highest) {
            (Some((n0, t0)), Some((h, th))) => {
                let expected = if h > n0 && th > t0 {
                    h as f64 + (send - th) * (h - n0) as f64 / (th - t0)
                } else {
                    h as f64
                };
                let k = ((expected - s as f64) / SEQ_SPAN as f64).round();
                s + (k.clamp(-1e9, 1e9) as i64) * SEQ_SPAN
            }
            _ => s,
        };
        first.get_or_insert((n, send));
        if highest.is_none_or(|(h, _)| n > h) {
            highest = Some((n, send));
        }
        out.push(n);
    }
    let low = out.iter().copied().min().unwrap_or(0).min(0);
    out.into_iter().map(|n| (n - low) as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Format, assert_samples, read};

    #[test]
    fn ping_d_replies_with_losses_duplicates_and_errors() {
        let text = "PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n\
[1733312345.101000] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=1.00 ms\n\
[1733312346.102000] 64 bytes from host.example (10.0.0.1): icmp_seq=2 ttl=64 time=2.0 ms\n\
[1733312346.102500] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=2.5 ms (DUP!)\n\
[1733312346.102600] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=2.6 ms (DUP!) (BAD CHECKSUM!)\n\
[1733312346.102700] 64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=2.7 ms (DUP!) (DIFFERENT ADDRESS!)\x07\n\
[1733312347.500000] no answer yet for icmp_seq=3\n\
[1733312348.000000] From 10.0.0.254 icmp_seq=4 Destination Host Unreachable\n\
[1733312349.150000] 64 bytes from 10.0.0.1: icmp_req=5 ttl=64 time=50 ms\n\
\n\
--- 10.0.0.1 ping statistics ---\n\
5 packets transmitted, 3 received, +1 duplicates, +1 errors, 40% packet loss, time 4005ms\n\
rtt min/avg/max/mdev = 1.000/17.667/50.000/23.099 ms\n";
        let s = read(text, Format::Ping).unwrap();
        let want = [
            (1, 1733312345.1, 1.0),
            (2, 1733312346.1, 2.0),
            (5, 1733312349.1, 50.0),
        ];
        assert_samples(&s, &want, 1e-6);
    }

    #[test]
    fn sequence_numbers_are_unwrapped_past_65535_and_late_replies_stay_behind() {
        let line = |seq: u32, t: f64| {
            format!("[{t:.6}] 64 bytes from ::1: icmp_seq={seq} ttl=64 time=0.1 ms\n")
        };
        let text: String = [65533, 65535, 65534, 0, 1, 2]
            .into_iter()
            .enumerate()
            .map(|(k, seq)| line(seq, 100.0 + k as f64))
            .collect();
        let s = read(&text, Format::Ping).unwrap();
        let seqs: Vec<u64> = s.iter().map(|x| x.seq.unwrap()).collect();
        assert_eq!(seqs, [65533, 65535, 65534, 65536, 65537, 65538]);
        // A reply from before the first one seen, across a wrap, comes before it.
        let s = read(&(line(0, 1.0) + &line(65535, 1.5)), Format::Ping).unwrap();
        assert_eq!((s[0].seq, s[1].seq), (Some(1), Some(0)));
        // ... and does not move the numbers after it: 0, late 65535, 1.
        let s = read(
            &(line(0, 1.0) + &line(65535, 1.5) + &line(1, 2.0)),
            Format::Ping,
        )
        .unwrap();
        let seqs: Vec<u64> = s.iter().map(|x| x.seq.unwrap()).collect();
        assert_eq!(seqs, [1, 0, 2]);
    }

    #[test]
    fn an_outage_longer_than_half_the_sequence_space_is_placed_by_the_send_schedule() {
        // 10 ms apart; replies 1..=100, then nothing until request 40100 (400 s later, 40 000
        // requests lost: more than 32768, so the nearest number would be 40100 - 65536).
        let line = |seq: u32| {
            let t = 1000.0 + f64::from(seq) * 0.01;
            format!(
                "[{t:.6}] 64 bytes from a: icmp_seq={} ttl=64 time=0.2 ms\n",
                seq % 65536
            )
        };
        let text: String = (1..=100).chain(40_100..40_110).map(line).collect();
        let s = read(&text, Format::Ping).unwrap();
        assert_eq!(s[99].seq, Some(100));
        assert_eq!(s[100].seq, Some(40_100), "after the outage: {:?}", s[100]);
        assert_eq!(s[109].seq, Some(40_109));
        // Past several wraps too: request 200 000 (wrapped three times), 2 000 s later.
        let text: String = (1..=100).chain([200_000, 200_001]).map(line).collect();
        let s = read(&text, Format::Ping).unwrap();
        assert_eq!((s[100].seq, s[101].seq), (Some(200_000), Some(200_001)));
    }

    #[test]
    fn replies_without_stamps_or_with_bad_fields_are_refused_naming_the_line() {
        let e = read(
            "PING a (10.0.0.1) 56(84) bytes of data.\n64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=0.1 ms\n",
            Format::Ping,
        )
        .unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("-D"), "{e}");
        for (bad, want) in [
            (
                "[x] 64 bytes from a: icmp_seq=1 ttl=1 time=1 ms",
                "Unix time",
            ),
            (
                "[1.0] 64 bytes from a: icmp_seq=70000 ttl=1 time=1 ms",
                "sequence number",
            ),
            (
                "[1.0] 64 bytes from a: icmp_seq=1 ttl=1 time=-1 ms",
                "round-trip",
            ),
        ] {
            let e = read(bad, Format::Ping).unwrap_err();
            assert_eq!(e.line, 1);
            assert!(e.reason.contains(want), "{bad}: {e}");
        }
        // No reply at all, or replies without round trips: refused, saying why.
        let e = read("PING a\n--- a ping statistics ---\n", Format::Ping).unwrap_err();
        assert!(e.reason.contains("no ping reply"), "{e}");
        let e = read(
            "PING a (1.2.3.4) 8(36) bytes of data.\n[1.0] 16 bytes from 1.2.3.4: icmp_seq=1 ttl=64\n",
            Format::Ping,
        )
        .unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.reason.contains("-s") && e.reason.contains("LC_ALL=C"),
            "{e}"
        );
    }
}
