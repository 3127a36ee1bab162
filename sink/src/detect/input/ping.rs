//! The `ping` format: the output of `ping -D` (iputils, Linux), whose reply lines carry the
//! Unix time they were printed at:
//!
//! ```text
//! [1733312345.123456] 64 bytes from 10.0.0.1: icmp_seq=7 ttl=64 time=0.045 ms
//! ```
//!
//! Each reply is a received packet: its sequence number (`icmp_seq=`, or `icmp_req=` and
//! `seq=` as older and smaller pings print it; 16 bits on the wire, so it is unwrapped past
//! 65535), its round trip (`time=`, ms) and its send time, the stamp less the round trip.
//! Duplicates (`(DUP!)`), `no answer yet` (`-O`), ICMP errors (`From ... Destination Host
//! Unreachable`), headers and statistics are skipped: a request without a reply is a
//! missing sequence number, a lost packet. Without `-D` a reply has no time of its own and
//! the file is refused with that advice (windows are cut by send time).

use super::InputError;
use crate::detect::Sample;

/// Sequence numbers wrap here.
const SEQ_SPAN: i64 = 1 << 16;

pub(super) fn read(text: &str) -> Result<Vec<Sample>, InputError> {
    let mut out = Vec::new();
    // The highest sequence number so far, unwrapped.
    let mut highest: Option<i64> = None;
    for (i, line) in text.lines().enumerate() {
        let err = |reason: String| InputError {
            line: i + 1,
            reason,
        };
        let l = line.trim();
        let (stamp, rest) = match l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((s, rest)) => (Some(s), rest.trim_start()),
            None => (None, l),
        };
        // A reply: "N bytes from ADDR: ... time=T ms"; anything else is skipped.
        if !rest.contains(" bytes from ") || rest.ends_with("(DUP!)") {
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
        let seq = unwrap(&mut highest, seq);
        out.push(Sample {
            seq: Some(seq),
            send: at - rtt_ms / 1e3,
            delay_ms: rtt_ms,
        });
    }
    Ok(out)
}

/// The 16-bit `seq` as the unwrapped number nearest the highest so far (replies arrive
/// nearly in order, so the nearest is the right one), which it then updates.
fn unwrap(highest: &mut Option<i64>, seq: u16) -> u64 {
    let s = i64::from(seq);
    let n = match *highest {
        None => s,
        Some(h) => {
            let step = (s - h).rem_euclid(SEQ_SPAN);
            let step = if step >= SEQ_SPAN / 2 {
                step - SEQ_SPAN
            } else {
                step
            };
            // Never below 0: a late reply from before the first one seen keeps its number.
            if h + step < 0 { s } else { h + step }
        }
    };
    *highest = Some(highest.map_or(n, |h| h.max(n)));
    n as u64
}

#[cfg(test)]
mod tests {
    use super::super::{Format, read};

    #[test]
    fn ping_d_replies_with_losses_duplicates_and_errors() {
        let text = "PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n\
[1733312345.101000] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=1.00 ms\n\
[1733312346.102000] 64 bytes from host.example (10.0.0.1): icmp_seq=2 ttl=64 time=2.0 ms\n\
[1733312346.102500] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=2.5 ms (DUP!)\n\
[1733312347.500000] no answer yet for icmp_seq=3\n\
[1733312348.000000] From 10.0.0.254 icmp_seq=4 Destination Host Unreachable\n\
[1733312349.150000] 64 bytes from 10.0.0.1: icmp_req=5 ttl=64 time=50 ms\n\
\n\
--- 10.0.0.1 ping statistics ---\n\
5 packets transmitted, 3 received, +1 duplicates, +1 errors, 40% packet loss, time 4005ms\n\
rtt min/avg/max/mdev = 1.000/17.667/50.000/23.099 ms\n";
        let s = read(text, Format::Ping).unwrap();
        let got: Vec<(u64, f64, f64)> = s
            .iter()
            .map(|x| (x.seq.unwrap(), x.send, x.delay_ms))
            .collect();
        let want = [
            (1, 1733312345.1, 1.0),
            (2, 1733312346.1, 2.0),
            (5, 1733312349.1, 50.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.2), (w.0, w.2));
            assert!((g.1 - w.1).abs() < 1e-6, "{g:?} against {w:?}");
        }
    }

    #[test]
    fn sequence_numbers_are_unwrapped_past_65535_and_late_replies_stay_behind() {
        let line = |seq: u32, t: f64| {
            format!("[{t:.6}] 64 bytes from ::1: icmp_seq={seq} ttl=64 time=0.1 ms\n")
        };
        let mut text = String::new();
        for (k, seq) in [65533, 65535, 65534, 0, 1, 2].into_iter().enumerate() {
            text += &line(seq, 100.0 + k as f64);
        }
        let s = read(&text, Format::Ping).unwrap();
        let seqs: Vec<u64> = s.iter().map(|x| x.seq.unwrap()).collect();
        assert_eq!(seqs, [65533, 65535, 65534, 65536, 65537, 65538]);
        // A file that starts just before a wrap.
        let s = read(&(line(65535, 1.0) + &line(0, 2.0)), Format::Ping).unwrap();
        assert_eq!(s[1].seq, Some(65536));
        // A reply from before the first one seen, across a wrap, is not made negative.
        let s = read(&(line(0, 1.0) + &line(65535, 2.0)), Format::Ping).unwrap();
        assert_eq!((s[0].seq, s[1].seq), (Some(0), Some(65535)));
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
        assert!(
            read("PING a\n--- a ping statistics ---\n", Format::Ping)
                .unwrap()
                .is_empty()
        );
    }
}
