//! Synthetic series with known truth, one per kind of problem.

use super::diagnose::Label;
use super::*;
use telemetry::sim_rng::SimRng;

/// A 10 Hz probe stream from t = 1000 s for `secs` seconds: delay(t, rng) per packet,
/// packets for which `lost(seq)` holds are missing.
fn series(
    secs: f64,
    mut delay: impl FnMut(f64, &mut SimRng) -> f64,
    lost: impl Fn(u64) -> bool,
) -> Vec<Sample> {
    let mut rng = SimRng::new(7);
    let n = (secs * 10.0) as u64;
    (0..n)
        .filter(|&q| !lost(q))
        .map(|q| {
            let send = 1000.0 + q as f64 * 0.1;
            Sample {
                seq: Some(q),
                send,
                delay_ms: delay(send - 1000.0, &mut rng),
            }
        })
        .collect()
}

fn base(rng: &mut SimRng) -> f64 {
    10.0 + 0.3 * rng.unit()
}

/// The baseline, or 30 to 50 ms above it at times `t` within one of `spans`.
fn raised(t: f64, rng: &mut SimRng, spans: &[std::ops::Range<f64>]) -> f64 {
    if spans.iter().any(|s| s.contains(&t)) {
        base(rng) + 30.0 + 20.0 * rng.unit()
    } else {
        base(rng)
    }
}

fn run(s: &[Sample], p: &Params) -> Vec<Event> {
    detect(s, p).events
}

#[test]
fn a_flat_series_is_silent() {
    let s = series(120.0, |_, r| base(r), |_| false);
    let r = detect(&s, &Params::default());
    assert!(r.events.is_empty(), "{:?}", r.events);
    assert_eq!(r.samples, 1200);
    assert_eq!(r.windows, 24);
    assert_eq!(r.lost, 0);
}

#[test]
fn a_delay_step_is_found_with_its_start_and_end() {
    // Delays 30 to 50 ms above the baseline from 40 s to 70 s.
    let s = series(120.0, |t, r| raised(t, r, &[40.0..70.0]), |_| false);
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 1, "{e:?}");
    let d = &e[0];
    assert_eq!(d.kind, Kind::Delay);
    assert!((d.start - 1040.0).abs() < 0.11, "{d:?}");
    assert!((d.end - 1069.9).abs() < 0.11, "{d:?}");
    let b = d.baseline_ms.unwrap();
    assert!((9.9..10.5).contains(&b), "{d:?}");
    assert!(d.peak_ms.unwrap() > 55.0);
    assert!(d.labels.contains(&Label::CongestionOverload), "{d:?}");
    assert_eq!(d.loss_rate, 0.0);
}

#[test]
fn a_step_that_begins_and_ends_inside_quiet_windows_keeps_its_start_and_end() {
    // (Raised spans, start, end.) Delays up from 43 s to 66.5 s: the windows at 40 s and
    // 65 s are raised only in part (their lowest modes hold most samples: no problem on
    // their own), but the event began and ended in them. Up from 41 s to 42 s, down again,
    // then up from 45 s to 70 s: the event starts at 45 s (the window before was not
    // raised until its end).
    let cases: [(&[std::ops::Range<f64>], f64, f64); 2] = [
        (&[43.0..66.5], 1043.0, 1066.4),
        (&[41.0..42.0, 45.0..70.0], 1045.0, 1069.9),
    ];
    for (spans, start, end) in cases {
        let s = series(120.0, |t, r| raised(t, r, spans), |_| false);
        let e = run(&s, &Params::default());
        assert_eq!(e.len(), 1, "{spans:?}: {e:?}");
        assert!((e[0].start - start).abs() < 0.11, "{spans:?}: {:?}", e[0]);
        assert!((e[0].end - end).abs() < 0.11, "{spans:?}: {:?}", e[0]);
    }
}

#[test]
fn a_stall_before_a_delay_step_does_not_move_its_start() {
    // The measuring host stalls once at 40.3 s (two samples 40 ms late); the real step
    // starts at 41.5 s, in the same window.
    let s = series(
        120.0,
        |t, r| raised(t, r, &[40.3..40.45, 41.5..70.0]),
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 1, "{e:?}");
    assert!((e[0].start - 1041.5).abs() < 0.11, "{:?}", e[0]);
    assert!((e[0].end - 1069.9).abs() < 0.11, "{:?}", e[0]);
}

#[test]
fn stalls_now_and_then_around_a_delay_step_do_not_stretch_it() {
    // A busy measuring host stalls every 0.4 s (one or two samples late each time) from
    // 35 s to 43 s and again from 68 s to 74.5 s; the real step runs from 43 s to 68 s.
    // A stall alone is no event: the windows before and after stay quiet.
    let stalls = |from: f64, to: f64| {
        (0..)
            .map(move |k| from + 0.4 * k as f64)
            .take_while(move |&t| t < to)
            .map(|t| t..t + 0.15)
    };
    let mut spans: Vec<std::ops::Range<f64>> = stalls(35.0, 43.0).collect();
    spans.push(43.0..68.0);
    spans.extend(stalls(68.3, 74.5));
    let s = series(120.0, |t, r| raised(t, r, &spans), |_| false);
    let e = run(&s, &Params::default());
    let delays: Vec<_> = e.iter().filter(|e| e.kind == Kind::Delay).collect();
    assert_eq!(delays.len(), 1, "{e:?}");
    assert!((delays[0].start - 1043.0).abs() < 0.11, "{:?}", delays[0]);
    assert!((delays[0].end - 1067.9).abs() < 0.11, "{:?}", delays[0]);
}

/// Congestion whose delays spread over 0 to 60 ms above the baseline (a few samples not
/// raised at all, scattered) starts and ends where it does, not where its unraised samples
/// happened to bunch (events started seconds late and ended seconds early).
#[test]
fn noisy_congestion_starts_and_ends_on_time() {
    for (seed, onset) in [
        (1, 30.0),
        (2, 30.0),
        (3, 29.0),
        (4, 30.3),
        (5, 31.7),
        (6, 30.0),
    ] {
        let mut rng = SimRng::new(seed);
        let s: Vec<Sample> = (0..1200u64)
            .map(|q| {
                let t = q as f64 * 0.1;
                let delay = if (onset..70.0).contains(&t) {
                    10.0 + 60.0 * rng.unit()
                } else {
                    base(&mut rng)
                };
                Sample {
                    seq: Some(q),
                    send: 1000.0 + t,
                    delay_ms: delay,
                }
            })
            .collect();
        let e = run(&s, &Params::default());
        assert_eq!(e.len(), 1, "seed {seed}: {e:?}");
        // Within the first and last few samples (some of which are not raised).
        assert!(
            (e[0].start - (1000.0 + onset)).abs() < 0.45,
            "seed {seed}, onset {onset}: {:?}",
            e[0]
        );
        assert!((e[0].end - 1069.9).abs() < 0.45, "seed {seed}: {:?}", e[0]);
    }
}

#[test]
fn a_slowly_building_queue_is_one_event() {
    // A queue builds from 30 s to 60 s (0 to 60 ms), then drains at once.
    let s = series(
        100.0,
        |t, r| {
            if (30.0..60.0).contains(&t) {
                base(r) + 2.0 * (t - 30.0)
            } else {
                base(r)
            }
        },
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].kind, Kind::Delay);
    // The first windows of the ramp rise less than the threshold; the event covers the rest.
    assert!(e[0].start >= 1030.0 && e[0].start <= 1040.0, "{:?}", e[0]);
    assert!((e[0].end - 1059.9).abs() < 0.11, "{:?}", e[0]);
}

#[test]
fn random_spikes_stay_silent() {
    // One packet in 70 is 50 ms late, at random.
    let s = series(
        300.0,
        |_, r| {
            if r.below(70) == 0 {
                base(r) + 50.0
            } else {
                base(r)
            }
        },
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert!(e.is_empty(), "{e:?}");
}

#[test]
fn bursts_of_loss_are_events_with_their_rates() {
    // 11 packets lost at 30 s, 6 at 90 s.
    let s = series(
        150.0,
        |_, r| base(r),
        |q| (300..311).contains(&q) || (900..906).contains(&q),
    );
    let e = run(&s, &Params::default());
    let loss: Vec<&Event> = e.iter().filter(|x| x.kind == Kind::Loss).collect();
    assert_eq!(loss.len(), 2, "{e:?}");
    assert!((loss[0].start - 1030.0).abs() < 0.11, "{:?}", loss[0]);
    assert!((loss[0].end - 1031.0).abs() < 0.11, "{:?}", loss[0]);
    assert!(
        (loss[0].loss_rate - 11.0 / 50.0).abs() < 1e-9,
        "{:?}",
        loss[0]
    );
    assert!(loss[0].labels.contains(&Label::ShortOutage));
    assert!(loss[0].labels.contains(&Label::RandomLoss));
    assert!((loss[1].loss_rate - 6.0 / 50.0).abs() < 1e-9);
    assert_eq!(detect(&s, &Params::default()).lost, 17);
}

#[test]
fn reordering_has_the_worked_examples_r() {
    // In window 3: arrivals 1 2 4 3 6 7 5 9 10 (+ offset), 8 lost.
    let mut s = series(60.0, |_, r| base(r), |q| q == 158);
    let at = s.iter().position(|x| x.seq == Some(151)).unwrap();
    let order = [151u64, 152, 154, 153, 156, 157, 155, 159, 160];
    let mut block: Vec<Sample> = order
        .iter()
        .map(|q| *s.iter().find(|x| x.seq == Some(*q)).unwrap())
        .collect();
    s.retain(|x| !(151..=160).contains(&x.seq.unwrap()));
    for (i, x) in block.drain(..).enumerate() {
        s.insert(at + i, x);
    }
    let e = run(&s, &Params::default());
    let r: Vec<&Event> = e.iter().filter(|x| x.kind == Kind::Reordering).collect();
    assert_eq!(r.len(), 1, "{e:?}");
    assert!((r[0].reordering - 1.2).abs() < 1e-12, "{:?}", r[0]);
    assert_eq!((r[0].start, r[0].end), (1015.0, 1020.0));
    assert!(r[0].labels.contains(&Label::ReorderingPersistent));
    assert!(e.iter().any(|x| x.kind == Kind::Loss));
}

/// R = sum |k| RD[k] / (1 - RD[0]) with RFC 5236's reorder density (the share of packets
/// displaced by k).
#[test]
fn r_follows_from_the_reorder_density() {
    let mut rng = SimRng::new(3);
    for _ in 0..50 {
        let mut arrivals: Vec<u64> = (0..200).filter(|_| rng.below(10) != 0).collect();
        for _ in 0..20 {
            let i = rng.below(arrivals.len() as u64 - 3) as usize;
            arrivals.swap(i, i + 1 + rng.below(3) as usize);
        }
        let r = window::reordering(&arrivals, &mut Vec::new());
        let mut sorted = arrivals.clone();
        sorted.sort_unstable();
        let n = arrivals.len() as f64;
        let mut density: std::collections::BTreeMap<i64, f64> = Default::default();
        for (a, e) in arrivals.iter().zip(&sorted) {
            *density.entry(*a as i64 - *e as i64).or_default() += 1.0 / n;
        }
        let rd0 = density.get(&0).copied().unwrap_or(0.0);
        let sum: f64 = density
            .iter()
            .map(|(k, v)| k.unsigned_abs() as f64 * v)
            .sum();
        let from_rd = if rd0 >= 1.0 { 0.0 } else { sum / (1.0 - rd0) };
        assert!((r - from_rd).abs() < 1e-9, "{r} vs {from_rd}");
    }
}

/// An outage of 300 s is one loss event from where it began, at every sensitivity, and no
/// short outage: its losses all fall in the window where packets came back, a window long.
#[test]
fn a_long_outage_is_an_event_at_every_sensitivity() {
    // Packets every 0.1 s from 1000 s: numbers 1000 to 3999 are lost (1100 s to 1400 s).
    let outage = series(500.0, |_, r| base(r), |q| (1000..4000).contains(&q));
    for s in [
        Sensitivity::LOW,
        Sensitivity(0.99),
        Sensitivity::MEDIUM,
        Sensitivity::HIGH,
    ] {
        let events = run(&outage, &Params::with_sensitivity(s));
        assert_eq!(events.len(), 1, "{s:?}: {events:?}");
        let e = &events[0];
        assert_eq!(e.kind, Kind::Loss, "{s:?}");
        assert!(
            (e.start - 1100.0).abs() < 1.0 && (e.end - 1400.0).abs() < 1.0,
            "{s:?}: {e:?}"
        );
        assert!(!e.labels.contains(&Label::ShortOutage), "{s:?}: {e:?}");
    }
}

#[test]
fn sensitivity_scales_the_thresholds() {
    // 20 s of delays spread over 4 ms: under medium's 5 ms threshold, over high's 2.5 ms.
    let bump = series(
        120.0,
        |t, r| {
            if (40.0..60.0).contains(&t) {
                base(r) + 4.0 * r.unit()
            } else {
                base(r)
            }
        },
        |_| false,
    );
    assert!(run(&bump, &Params::with_sensitivity(Sensitivity::MEDIUM)).is_empty());
    let high = run(&bump, &Params::with_sensitivity(Sensitivity::HIGH));
    assert_eq!(high.len(), 1, "{high:?}");
    assert_eq!(high[0].kind, Kind::Delay);
    // A 3.5 s burst of 40 ms inside one window (a 5 s event): medium keeps it, low (10 s
    // events at least) does not.
    let short = series(
        120.0,
        |t, r| {
            if (51.0..54.5).contains(&t) {
                base(r) + 40.0
            } else {
                base(r)
            }
        },
        |_| false,
    );
    assert_eq!(run(&short, &Params::default()).len(), 1);
    assert!(run(&short, &Params::with_sensitivity(Sensitivity::LOW)).is_empty());
    // Loss and reordering thresholds turn up from nothing below medium, with no jump at 1.
    for (k, loss, r) in [
        (1.0, 0.0, 0.0),
        (2.0, 0.0, 0.0),
        (0.5, 0.02, 2.0),
        (0.25, 0.06, 6.0),
    ] {
        let p = Params::with_sensitivity(Sensitivity(k));
        assert!((p.loss_rate - loss).abs() < 1e-12, "{k}: {}", p.loss_rate);
        assert!((p.reordering - r).abs() < 1e-12, "{k}: {}", p.reordering);
    }
    let near = Params::with_sensitivity(Sensitivity(0.99));
    assert!(near.loss_rate < 0.001 && near.reordering < 0.1, "{near:?}");
    assert_eq!(Sensitivity::parse("high"), Ok(Sensitivity::HIGH));
    assert_eq!(Sensitivity::parse("1.5"), Ok(Sensitivity(1.5)));
    assert!(Sensitivity::parse("0").is_err());
    assert!(Sensitivity::parse("loud").is_err());
}

#[test]
fn a_level_shift_is_a_route_or_clock_change() {
    // The path gets 25 ms longer and stays so: early in a window (at 51.5 s) and late in
    // one (at 53.5 s, where the lower level still holds 70% of the window's samples).
    for at in [51.5, 53.5] {
        let s = series(
            120.0,
            |t, r| if t >= at { base(r) + 25.0 } else { base(r) },
            |_| false,
        );
        let e = run(&s, &Params::default());
        // The window holding the change is the problem; the flat windows after it have a
        // baseline of their own (the new level), as the source says of long events.
        assert_eq!(e.len(), 1, "at {at}: {e:?}");
        assert_eq!(e[0].kind, Kind::Delay);
        assert!(
            e[0].labels.contains(&Label::RouteOrClockChange),
            "at {at}: {:?}",
            e[0]
        );
        assert!(
            !e[0].labels.contains(&Label::CongestionOverload),
            "at {at}: {:?}",
            e[0]
        );
        assert!(
            (e[0].start - (1000.0 + at)).abs() < 0.11,
            "at {at}: {:?}",
            e[0]
        );
    }
}

/// A level that changes at a window boundary, or too late in a window to make it a
/// problem, is found in the window after: flat at a level more than 10 ms from the one
/// before (both were missed: neither window's own spread shows the change). Down as well as
/// up; once, not in every window at the new level.
#[test]
fn a_level_shift_at_a_window_boundary_is_found() {
    for (at, step) in [(50.0, 25.0), (54.6, 25.0), (55.0, 20.0), (50.0, -20.0)] {
        let s = series(
            120.0,
            |t, r| {
                if t >= at {
                    base(r) + 30.0 + step
                } else {
                    base(r) + 30.0
                }
            },
            |_| false,
        );
        let e = run(&s, &Params::default());
        assert_eq!(e.len(), 1, "at {at}, {step} ms: {e:?}");
        assert!(
            e[0].labels.contains(&Label::RouteOrClockChange),
            "at {at}, {step} ms: {:?}",
            e[0]
        );
        assert!(
            (e[0].start - (1000.0 + at)).abs() < 0.11,
            "at {at}, {step} ms: {:?}",
            e[0]
        );
    }
    // A drift of 4 ms a window is no shift.
    let s = series(120.0, |t, r| base(r) + 4.0 * (t / 5.0).floor(), |_| false);
    assert!(run(&s, &Params::default()).is_empty());
    // Nor a flow (no sequence numbers) that comes back at a level of its own after windows
    // of few samples.
    let s: Vec<Sample> = series(
        120.0,
        |t, r| base(r) + if t >= 60.0 { 20.0 } else { 0.0 },
        |_| false,
    )
    .into_iter()
    .filter(|x| !(1040.0..1060.0).contains(&x.send) || x.seq.is_some_and(|q| q % 20 == 0))
    .map(|x| Sample { seq: None, ..x })
    .collect();
    assert!(run(&s, &Params::default()).is_empty());
}

/// Sweeps `d` on for a minute from `sweep`, finishes it, and checks that it found one
/// event, where `offline` found it.
fn assert_one_event_as_offline(
    mut d: online::Detector,
    sweep: f64,
    mut events: Vec<Event>,
    offline: &[Event],
) {
    for k in 0..60 {
        d.tick(sweep + f64::from(k));
        events.extend(d.take_events());
    }
    events.extend(d.finish().events);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        (events[0].start - offline[0].start).abs() < 1e-9
            && (events[0].end - offline[0].end).abs() < 1e-9,
        "{events:?} against {offline:?}"
    );
}

/// A series whose clock runs 20 s behind the sink's, its samples arriving as they are sent
/// and the sink's sweeps ticking every second by its own clock, has its windows closed by
/// its own clock: a problem is one event, as offline (each sweep closed a part of a window,
/// and each part was an event of its own).
#[test]
fn a_series_behind_the_sinks_clock_keeps_its_windows_whole() {
    let s = series(120.0, |t, r| raised(t, r, &[40.0..70.0]), |_| false);
    let offline = run(&s, &Params::default());
    assert_eq!(offline.len(), 1, "{offline:?}");
    let behind = 20.0;
    let mut d = online::Detector::new(Params::default());
    let mut events = Vec::new();
    let mut sweep = 1000.0 + behind;
    for x in &s {
        let now = x.send + behind;
        while sweep <= now {
            d.tick(sweep);
            events.extend(d.take_events());
            sweep += 1.0;
        }
        d.note_arrival(now, x.send);
        d.push(*x);
    }
    assert_one_event_as_offline(d, sweep, events, &offline);
    // A window closes when the series' own clock has left it behind by a window: by the
    // sink's, that far later.
    let mut d = online::Detector::new(Params::default());
    d.note_arrival(1020.0, 1000.0);
    d.push(s[0]);
    assert_eq!(d.next_close(), Some(1000.0 + 2.0 * 5.0 + behind));
    d.tick(1029.0);
    assert!(d.last_window.is_none());
    d.tick(1030.0);
    assert!(d.last_window.is_some());
    // A sample of a window already closed, every window closed since, is not a window of
    // its own again (judged twice, in parts): it joins the oldest one still to come.
    let mut d = online::Detector::new(Params::default());
    d.push_all(&s[..100]);
    d.tick(2000.0);
    assert_eq!(d.last_window.map(|w| w.start), Some(1005.0));
    d.push(s[10]);
    d.tick(3000.0);
    assert_eq!(d.last_window.map(|w| w.start), Some(1010.0));
}

/// A series of a sample a second (ping's pace; a flow of a packet a second) online gets
/// windows long enough to show a delay problem, as offline: 20 s (in 5 s windows of 5
/// samples it never could: more than 5 raised samples are needed). A faster one keeps 5 s.
#[test]
fn a_slow_series_chooses_windows_that_can_show_a_problem() {
    let at = |hz: f64| -> Vec<Sample> {
        (0..(600.0 * hz) as u64)
            .map(|q| {
                let t = q as f64 / hz;
                let delay_ms = if (200.0..300.0).contains(&t) {
                    60.0 + (q % 7) as f64 * 3.0
                } else {
                    10.0 + (q % 3) as f64 * 0.1
                };
                Sample {
                    seq: Some(q),
                    send: 1000.0 + t,
                    delay_ms,
                }
            })
            .collect()
    };
    let delays = |mut d: online::Detector, s: &[Sample]| {
        d.push_all(s);
        let w = d.window_s();
        let n = d
            .finish()
            .events
            .iter()
            .filter(|e| e.kind == Kind::Delay)
            .count();
        (w, n)
    };
    let slow = at(1.0);
    let (w, n) = delays(online::Detector::adaptive(Params::default()), &slow);
    assert_eq!(w, 20.0);
    assert!(n > 0, "no delay event");
    assert_eq!(
        delays(online::Detector::new(Params::default()), &slow),
        (5.0, 0)
    );
    let (w, n) = delays(online::Detector::adaptive(Params::default()), &at(10.0));
    assert_eq!(w, 5.0);
    assert!(n > 0, "no delay event at 10 Hz");
    // A series that stops after a few samples chooses from those a minute on (its clock
    // 2 s behind the caller's).
    let mut d = online::Detector::adaptive(Params::default());
    d.note_arrival(1002.0, 1000.0);
    d.push_all(&slow[..6]);
    assert_eq!(d.next_close(), Some(1062.0));
    d.tick(1061.0);
    assert!(d.last_window.is_none());
    d.tick(1062.0);
    assert_eq!(d.window_s(), 20.0);
    assert!(d.last_window.is_some());
    // A burst at the start (a flow's first packets back to back) does not choose for it.
    let mut burst: Vec<Sample> = (0..8u64)
        .map(|q| Sample {
            seq: Some(q),
            send: 999.0 + q as f64 * 1e-3,
            delay_ms: 10.0,
        })
        .collect();
    burst.extend(slow.iter().map(|x| Sample {
        seq: x.seq.map(|q| q + 8),
        ..*x
    }));
    assert_eq!(
        delays(online::Detector::adaptive(Params::default()), &burst).0,
        20.0
    );
}

/// A sample timed far ahead of the caller's clock (a corrupt time, a clock stepped ahead
/// and back) is refused: taken, it closed every open window at once and every later sample
/// joined the window it opened, a day ahead, so the series' problem was not found in its
/// windows. Samples as far ahead as a minute are taken.
#[test]
fn a_sample_far_ahead_of_the_clock_is_refused() {
    let s = series(120.0, |t, r| raised(t, r, &[40.0..70.0]), |_| false);
    let offline = run(&s, &Params::default());
    assert_eq!(offline.len(), 1, "{offline:?}");
    let mut d = online::Detector::new(Params::default());
    let mut events = Vec::new();
    let mut sweep = 1000.0;
    for (i, x) in s.iter().enumerate() {
        let now = x.send + 0.005;
        while sweep <= now {
            d.tick(sweep);
            events.extend(d.take_events());
            sweep += 1.0;
        }
        if i == 200 {
            let stray = Sample {
                seq: None,
                send: now + 86_400.0,
                ..*x
            };
            assert!(!d.push_at(now, stray));
            assert!(!d.push_loss_at(now, now + 86_400.0, now + 86_390.0, 5, 10));
            assert!(!d.push_unsure_at(now, now + 86_400.0, now + 86_390.0));
            let near = Sample {
                send: now + online::MAX_AHEAD_S,
                ..stray
            };
            assert!(online::Detector::new(Params::default()).push_at(now, near));
        }
        assert!(d.push_at(now, *x));
    }
    assert_one_event_as_offline(d, sweep, events, &offline);
}

/// The lag a series' windows close by follows its clock when it steps (it kept the least
/// ever seen: one step and the windows closed early again, for good).
#[test]
fn the_lag_follows_a_clock_that_steps() {
    let mut d = online::Detector::new(Params::default());
    d.push(Sample {
        seq: None,
        send: 1000.0,
        delay_ms: 1.0,
    });
    // The window of 1000 s closes when the series' clock reaches 1010 s.
    let closes = |d: &online::Detector| d.next_close().map(|t| t - 1010.0);
    d.note_arrival(1000.0, 1000.0);
    assert_eq!(closes(&d), Some(0.0));
    // The series' clock steps 20 s back: a minute on, its lag is 20 s.
    d.note_arrival(1080.0, 1060.0);
    assert_eq!(closes(&d), Some(20.0));
    // Then 30 s: the least of this period and the last holds until both have it.
    d.note_arrival(1125.0, 1095.0);
    assert_eq!(closes(&d), Some(20.0));
    d.note_arrival(1155.0, 1125.0);
    assert_eq!(closes(&d), Some(30.0));
}

#[test]
fn loss_known_from_counters_without_sequence_numbers() {
    let mut d = online::Detector::new(Params::default());
    for i in 0..300 {
        let t = 2000.0 + f64::from(i) * 0.1;
        d.push(Sample {
            seq: None,
            send: t,
            delay_ms: 5.0,
        });
        if (100..110).contains(&i) {
            d.push_loss(t, 3, 10);
        } else if i == 200 {
            // Counters running ahead of each other: evens out in the window.
            d.push_loss(t, -2, 10);
            d.push_loss(t + 0.01, 2, 10);
        }
    }
    let r = d.finish();
    let loss: Vec<&Event> = r.events.iter().filter(|e| e.kind == Kind::Loss).collect();
    assert_eq!(loss.len(), 1, "{:?}", r.events);
    assert_eq!(r.lost, 30);
    assert!(
        loss[0].start >= 2010.0 && loss[0].end <= 2015.0,
        "{:?}",
        loss[0]
    );
}

#[test]
fn late_and_duplicate_packets_count_once_online() {
    // 300 s at 10 Hz, one packet in 97 lost; neighbours swapped every 50 packets (one
    // reordering per window) and every 70th packet delivered twice.
    let lost = |q: u64| q % 97 == 5;
    let mut s = series(300.0, |_, rng| base(rng), lost);
    for i in (10..s.len() - 1).step_by(50) {
        s.swap(i, i + 1);
    }
    let mut arrivals = Vec::new();
    for (i, x) in s.iter().enumerate() {
        arrivals.push(*x);
        if i % 70 == 0 {
            arrivals.push(*x);
        }
    }
    let mut d = online::Detector::new(Params::default());
    d.push_all(&arrivals);
    let r = d.finish();
    assert_eq!(r.lost, (0..3000).filter(|&q| lost(q)).count() as u64);
    let offline = detect(&s, &Params::default());
    assert_eq!(r.lost, offline.lost);
    assert_eq!(r.windows, offline.windows);
    let reorder: Vec<&Event> = r
        .events
        .iter()
        .filter(|e| e.kind == Kind::Reordering)
        .collect();
    assert_eq!(reorder.len(), 1, "{:?}", r.events);
    assert!(reorder[0].end - reorder[0].start > 250.0);
}

/// Online, a problem that lasts is reported while it lasts: every `max_event_s` an event,
/// the next starting where the last ended; offline it is one event.
#[test]
fn a_lasting_problem_is_reported_while_it_lasts_online() {
    // Delays raised from 20 s to the end of a 300 s series: online, events were found as
    // the windows came, long before the series ended.
    let s = series(300.0, |t, r| raised(t, r, &[20.0..300.0]), |_| false);
    let offline = run(&s, &Params::default());
    assert_eq!(offline.len(), 1, "{offline:?}");
    let p = Params::online(Sensitivity::MEDIUM);
    let mut d = online::Detector::new(p);
    let mut found_by = Vec::new();
    for x in &s {
        d.push(*x);
        for e in d.take_events() {
            found_by.push((e.start, e.end, x.send));
        }
    }
    assert!(found_by.len() >= 3, "{found_by:?}");
    for w in found_by.windows(2) {
        assert!(
            (w[1].0 - w[0].1).abs() < 5.1,
            "one after the other: {found_by:?}"
        );
    }
    for (start, end, at) in &found_by {
        assert!(end - start <= ONLINE_MAX_EVENT_S + 0.1, "{found_by:?}");
        assert!(
            at - end < 15.0,
            "found within a few windows of its end: {found_by:?}"
        );
    }
}

/// An outage longer than a window: the loss event runs from the first lost packet's send
/// time to the last's, not only over the window where packets came back.
#[test]
fn an_outage_longer_than_a_window_is_placed_from_its_start() {
    // 10 Hz; nothing arrives from 12 s to 28 s.
    let s = series(60.0, |_, r| base(r), |q| (120..280).contains(&q));
    let e = run(&s, &Params::default());
    let loss: Vec<&Event> = e.iter().filter(|e| e.kind == Kind::Loss).collect();
    assert_eq!(loss.len(), 1, "{e:?}");
    let l = loss[0];
    assert!((l.start - 1012.0).abs() < 0.15, "{l:?}");
    assert!((l.end - 1027.9).abs() < 0.15, "{l:?}");
}

/// A probe a second (ping's default): 5 s windows hold 5 samples, too few for a delay
/// problem; the window for the series' spacing (20 s) finds 100 s of congestion.
#[test]
fn a_sparse_series_gets_windows_that_can_hold_a_problem() {
    let mut rng = SimRng::new(3);
    let s: Vec<Sample> = (0..600u64)
        .map(|q| {
            let send = 1000.0 + q as f64;
            let congested = (1200.0..1300.0).contains(&send);
            Sample {
                seq: Some(q),
                send,
                delay_ms: base(&mut rng)
                    + if congested {
                        30.0 + 100.0 * rng.unit()
                    } else {
                        0.0
                    },
            }
        })
        .collect();
    assert!(
        run(&s, &Params::default()).is_empty(),
        "5 s windows see nothing"
    );
    let spacing = median_spacing_s(&s);
    assert_eq!(spacing, Some(1.0));
    let window_s = window_for(spacing, &Params::default());
    assert_eq!(window_s, 20.0);
    let p = Params {
        window_s,
        merge_gap_s: window_s,
        ..Params::default()
    };
    let e = run(&s, &p);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].kind, Kind::Delay);
    assert!(e[0].start <= 1205.0 && e[0].end >= 1290.0, "{e:?}");
    // A 10 Hz series keeps 5 s windows; none without two samples.
    assert_eq!(window_for(Some(0.1), &Params::default()), 5.0);
    assert_eq!(window_for(None, &Params::default()), 5.0);
    assert!(series_warnings(&s, spacing, window_s).is_empty());
}

/// A file newest first, or with send times in ms, is said; sequence numbers at both ends
/// of their range and delays beyond the walk's resolution end (they hung).
#[test]
fn odd_series_are_said_and_never_hang() {
    let s = series(60.0, |_, r| base(r), |_| false);
    let reversed: Vec<Sample> = s.iter().rev().cloned().collect();
    let w = series_warnings(&reversed, median_spacing_s(&reversed), 5.0);
    assert!(w.len() == 1 && w[0].contains("time order"), "{w:?}");
    let in_ms: Vec<Sample> = s
        .iter()
        .map(|x| Sample {
            send: x.send * 1e3,
            ..*x
        })
        .collect();
    let w = series_warnings(&in_ms, median_spacing_s(&in_ms), 5.0);
    assert!(w.len() == 1 && w[0].contains("seconds"), "{w:?}");
    let ends = [
        Sample {
            seq: Some(u64::MAX),
            send: 100.0,
            delay_ms: 5.0,
        },
        Sample {
            seq: Some(0),
            send: 100.1,
            delay_ms: 5.0,
        },
    ];
    let r = detect(&ends, &Params::default());
    assert_eq!(r.samples, 2);
    let w = series_warnings(&ends, median_spacing_s(&ends), 5.0);
    assert!(w.len() == 1 && w[0].contains("a jump"), "{w:?}");
    let huge: Vec<Sample> = (0..100u64)
        .map(|q| Sample {
            seq: Some(q),
            send: 100.0 + q as f64 * 0.1,
            delay_ms: 1e17 + 16.0 * (q % 2) as f64,
        })
        .collect();
    assert!(detect(&huge, &Params::default()).events.is_empty());
}

/// A flow of a few packets a window whose packets cross a window boundary in flight (or
/// whose far end's clock is off): the loss counted on one side of the boundary and the
/// gain on the other even out, in either order; left apart, the loss was a fifth of the
/// window's packets and an event.
#[test]
fn counted_loss_evens_out_across_a_window_boundary() {
    for sign in [1, -1] {
        let mut d = online::Detector::new(Params::default());
        for w in 0..5 {
            let start = 3000.0 + 5.0 * f64::from(w);
            for j in 0..4 {
                d.push_loss(start + f64::from(j), 0, 1);
            }
            if w == 0 {
                // Sent at the end of the first window, counted delivered in the next (sign
                // 1); or counted delivered first, sent next (sign -1).
                d.push_loss(3004.99, sign, u64::from(sign > 0));
                d.push_loss(3005.01, -sign, u64::from(sign < 0));
            }
        }
        let r = d.finish();
        assert!(
            r.events.iter().all(|e| e.kind != Kind::Loss),
            "sign {sign}: {:?}",
            r.events
        );
    }
    // Real loss is still found: the same flow losing 2 of the 5 packets of a window.
    let mut d = online::Detector::new(Params::default());
    for w in 0..5 {
        let start = 3000.0 + 5.0 * f64::from(w);
        for j in 0..5 {
            d.push_loss(start + f64::from(j), i64::from(w == 2 && j < 2), 1);
        }
    }
    let r = d.finish();
    assert_eq!(
        r.events.iter().filter(|e| e.kind == Kind::Loss).count(),
        1,
        "{:?}",
        r.events
    );
}

/// A problem until the series stops (a flow that ended during it, a probe stream stopped):
/// online, the event is reported once no window that could still join it can come, as a
/// window after it would have ended it, not only when the detector is finished.
#[test]
fn an_event_of_a_series_gone_quiet_is_reported_online() {
    let s = series(40.0, |t, r| raised(t, r, &[20.0..40.0]), |_| false);
    let p = Params::online(Sensitivity::MEDIUM);
    let mut d = online::Detector::new(p);
    for x in &s {
        d.push(*x);
        assert!(d.take_events().is_empty(), "nothing before the series ends");
    }
    // The last problem window ends at 1040 s: it is final once a window starting up to
    // the merge gap later would have closed.
    let final_at = p.event_final_at(1040.0);
    assert_eq!(final_at, 1055.0);
    // Its windows close a window after their end; the event is still being built then.
    assert_eq!(d.next_close(), Some(1040.0));
    d.tick(1045.0);
    assert!(d.take_events().is_empty(), "a window could still join it");
    assert_eq!(d.next_close(), Some(final_at), "a sweep is due then");
    d.tick(final_at - 0.1);
    assert!(d.take_events().is_empty(), "not before");
    d.tick(final_at);
    let events = d.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].kind, Kind::Delay);
    assert!((events[0].start - 1020.0).abs() < 1.0, "{events:?}");
    assert_eq!(d.next_close(), None, "nothing left to close");
    // Finished, nothing more: the event went once.
    assert!(d.finish().events.is_empty());
}

/// Numbers the caller excuses (packets that arrived but were left out) are no loss; a
/// number far beyond the series' (not of it) excuses nothing.
#[test]
fn excused_numbers_are_no_loss() {
    // 60 s at 10 Hz, 100 to 149 missing.
    let s = series(60.0, |_, rng| base(rng), |q| (100..150).contains(&q));
    let lost = |excuse: &[u64]| {
        let mut d = online::Detector::new(Params::default());
        d.push_all(&s[..100]);
        for &q in excuse {
            d.excuse_seq(q);
        }
        d.push_all(&s[100..]);
        d.finish().lost
    };
    assert_eq!(lost(&[]), 50);
    assert_eq!(lost(&[120]), 29, "100 to 120 excused");
    assert_eq!(lost(&[110, 149, 130]), 0);
    assert_eq!(lost(&[1 << 40]), 50, "not of the series");
}

/// A flow whose far end's clock runs 30 ms behind the near end's has its packets counted
/// delivered three 10 ms epochs before they are counted sent. Where it ends just after a
/// window began, its last packets were counted delivered in the window before: no loss,
/// in the window they were sent in or any other. Real loss while the counts stand so is
/// still found, at the latest as they come back to even.
#[test]
fn counts_of_a_far_end_whose_clock_runs_behind_are_no_loss() {
    for lost_at in [None, Some(1200i64)] {
        let mut d = online::Detector::new(Params::default());
        // 10 packets an epoch for 20.02 s: the last 2 epochs in a window of their own.
        let epochs = 2002;
        let sent = |i: i64| if (0..epochs).contains(&i) { 10i64 } else { 0 };
        // From the far end's first count, 3 epochs before the near end's.
        for i in -3..epochs + 3 {
            let mut delivered = sent(i + 3);
            if lost_at == Some(i + 3) {
                delivered -= 4;
            }
            let t = 1000.0 + i as f64 * 0.01;
            d.push_loss(t, sent(i) - delivered, sent(i) as u64);
        }
        let r = d.finish();
        let loss: Vec<&Event> = r.events.iter().filter(|e| e.kind == Kind::Loss).collect();
        match lost_at {
            None => {
                assert!(loss.is_empty(), "{loss:?}");
                assert_eq!(r.lost, 0);
            }
            Some(_) => assert_eq!(r.lost, 4),
        }
    }
}

/// Counts that stand apart by a few packets for good (packets counted sent in epochs the
/// series took and delivered in ones it did not), then stand two closer for a while and
/// move back in the last window, where the flow sends its last two packets: no loss there;
/// lost packets beyond the most the counts stood apart are found.
#[test]
fn counts_that_gain_back_what_they_lost_before_are_no_loss() {
    for real in [0i64, 2] {
        let mut d = online::Detector::new(Params::default());
        for i in 0..2002i64 {
            let t = 3000.0 + i as f64 * 0.01;
            let sent = if i < 2000 { 10 } else { 1 };
            let lost = match i {
                1 => 5,
                1400 => -2,
                2000 => 2 + real,
                _ => 0,
            };
            d.push_loss(t, lost, sent);
        }
        let r = d.finish();
        let loss: Vec<&Event> = r.events.iter().filter(|e| e.kind == Kind::Loss).collect();
        assert_eq!(loss.is_empty(), real == 0, "{loss:?}");
        assert_eq!(r.lost, 5 + real as u64, "{r:?}");
    }
}

/// A flow's counts whose far end's clock runs 30 ms ahead or behind the near end's, taken
/// at their time from mid-flow (where a series starts once the path decodes): the counts
/// each end made of packets whose counts at the other end came before the series began are
/// left out, so neither a loss nor a gain stands from the start; 7 packets lost later are
/// found, exactly, and nothing else.
#[test]
fn counts_shifted_to_their_time_start_even() {
    for far_ahead in [3i64, -3] {
        let mut d = online::Detector::new(Params::default());
        let now = 4000.0 + 100.0;
        // 10 packets an epoch from epoch -1000 (the series starts at 0) to 2005; 7 lost
        // at epoch 1200 (counted at the far end `far_ahead` epochs later).
        let sent = |i: i64| if (-1000..2005).contains(&i) { 10u64 } else { 0 };
        for i in 0..2010i64 {
            let mut delivered = sent(i - far_ahead);
            if i - far_ahead == 1200 {
                delivered -= 7;
            }
            let t = 4000.0 + i as f64 * 0.01;
            let moved = far_ahead as f64 * 0.01;
            assert!(d.push_shifted_at(now, (t, t + 0.01), sent(i), delivered, moved));
        }
        let r = d.finish();
        let loss: Vec<&Event> = r.events.iter().filter(|e| e.kind == Kind::Loss).collect();
        assert_eq!(r.lost, 7, "far end ahead {far_ahead}: {r:?}");
        assert!(loss.len() <= 1, "{loss:?}");
    }
}

/// A steady step of delay above tau_d is one event over the raised stretch, against the
/// baseline before it, wherever it falls against the windows (a step at a window boundary
/// below 10 ms was missed; one of 15 ms was split at its windows, the fall back to normal
/// reported as a delay event whose peak was below its baseline, and events ended a window
/// late).
#[test]
fn a_steady_step_of_delay_is_one_event_over_it() {
    for (step, from, until) in [
        (7.0, 5.0, 15.0),
        (7.0, 7.5, 17.5),
        (15.0, 2.0, 15.0),
        (15.0, 5.0, 15.0),
        (15.0, 7.5, 37.5),
        (30.0, 12.3, 31.1),
    ] {
        let s = series(
            60.0,
            |t, r| {
                base(r)
                    + if (from..until).contains(&t) {
                        step
                    } else {
                        0.0
                    }
            },
            |_| false,
        );
        let e = run(&s, &Params::default());
        let what = format!("{step} ms from {from} s to {until} s: {e:?}");
        assert_eq!(e.len(), 1, "{what}");
        assert_eq!(e[0].kind, Kind::Delay, "{what}");
        assert!((e[0].start - (1000.0 + from)).abs() < 0.15, "{what}");
        assert!((e[0].end - (1000.0 + until)).abs() < 0.15, "{what}");
        let baseline = e[0].baseline_ms.unwrap();
        assert!((10.0..10.3).contains(&baseline), "{what}");
        assert!(e[0].peak_ms.unwrap() > baseline + step, "{what}");
    }
    // Below tau_d: none.
    let s = series(
        60.0,
        |t, r| base(r) + if (5.0..15.0).contains(&t) { 4.0 } else { 0.0 },
        |_| false,
    );
    assert!(run(&s, &Params::default()).is_empty());
}

/// A level that stays up becomes the baseline after a minute: one event, not one a
/// window (or, online, one a minute) for as long as the new level lasts.
#[test]
fn a_level_that_stays_up_is_the_new_normal_after_a_minute() {
    let s = series(
        200.0,
        |t, r| base(r) + if t >= 20.0 { 15.0 } else { 0.0 },
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 1, "{e:?}");
    assert!((e[0].start - 1020.0).abs() < 0.15, "{e:?}");
    assert!(
        e[0].end - e[0].start >= super::aggregate::ADOPT_LEVEL_S - 5.0
            && e[0].end - e[0].start <= super::aggregate::ADOPT_LEVEL_S + 0.1,
        "{e:?}"
    );
    // Then a fall back to the old level is a level change of its own.
    let s = series(
        200.0,
        |t, r| {
            base(r)
                + if (20.0..140.0).contains(&t) {
                    15.0
                } else {
                    0.0
                }
        },
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 2, "{e:?}");
    assert!((e[1].start - 1140.0).abs() < 0.15, "{e:?}");
    assert!(e[1].labels.contains(&Label::RouteOrClockChange), "{e:?}");
}

/// A loss or reordering event reports the delay baseline from before it, not the raised
/// level of the windows it spans (the loss came with a delay).
#[test]
fn loss_events_report_the_delay_baseline_before_them() {
    let s = series(
        60.0,
        |t, r| base(r) + if (20.0..40.0).contains(&t) { 20.0 } else { 0.0 },
        |q| (200..400).contains(&q) && q % 10 == 3,
    );
    let e = run(&s, &Params::default());
    let loss: Vec<&Event> = e.iter().filter(|e| e.kind == Kind::Loss).collect();
    assert_eq!(loss.len(), 1, "{e:?}");
    let baseline = loss[0].baseline_ms.unwrap();
    assert!((10.0..10.3).contains(&baseline), "{e:?}");
}

/// Online (events cut at a minute), a level that rises part-way through a window and stays
/// up is one event, cut where its level becomes the baseline: the window after it was an
/// extra event whose baseline was its own raised level.
#[test]
fn a_level_that_stays_up_online_is_one_event() {
    let s = series(
        200.0,
        |t, r| base(r) + if t >= 22.0 { 15.0 } else { 0.0 },
        |_| false,
    );
    let p = Params {
        max_event_s: super::ONLINE_MAX_EVENT_S,
        ..Params::default()
    };
    let e = run(&s, &p);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!((e[0].start - 1022.0).abs() < 0.15, "{e:?}");
    assert!(e[0].baseline_ms.unwrap() < 10.5, "{e:?}");
}

/// A steady step with a few spikes is no end-host noise: its samples are high against the
/// baseline before it, not against their window's own minimum.
#[test]
fn a_steady_step_with_spikes_is_not_end_host_noise() {
    let s = series(
        80.0,
        |t, r| {
            let spike = if r.unit() < 0.02 {
                10.0 + 20.0 * r.unit()
            } else {
                0.0
            };
            base(r) + spike + if (20.0..50.0).contains(&t) { 8.0 } else { 0.0 }
        },
        |_| false,
    );
    let e = run(&s, &Params::default());
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(!e[0].labels.contains(&Label::EndHostNoise), "{e:?}");
}
