//! `pint-bench detect`: how many samples per second one core runs through detection.
//!
//! Probe streams at 10 Hz (the rate Pythia's windows were chosen for): each stream has its
//! own online detector, and the streams' samples are pushed interleaved, one time step for
//! every stream after another, as a collector receives them; one stream in ten has a 30 s
//! delay spell and a burst of loss, so windows close with problems as well as without. One
//! long series through the offline entry point is timed too.

use std::time::Instant;

use serde::Serialize;
use sink::detect::online::Detector;
use sink::detect::{Params, Sample, detect};
use telemetry::sim_rng::SimRng;

/// What to run.
#[derive(Debug, Clone)]
pub struct DetectBenchOptions {
    /// Streams watched at once.
    pub streams: u32,
    /// Seconds of each stream.
    pub seconds: u32,
}

/// The results.
#[derive(Debug, Clone, Serialize)]
pub struct DetectBenchResult {
    /// Streams.
    pub streams: u32,
    /// Samples pushed.
    pub samples: u64,
    /// Seconds taken (one core).
    pub seconds: f64,
    /// Samples per second.
    pub samples_per_second: f64,
    /// 10 Hz streams one core keeps up with at that rate.
    pub streams_per_core: f64,
    /// Events found.
    pub events: usize,
    /// Samples per second of one long series through the offline path.
    pub offline_samples_per_second: f64,
}

fn delay(t: f64, stream: u32, rng: &mut SimRng) -> f64 {
    let base = 10.0 + f64::from(stream % 7) + 0.3 * rng.unit();
    if stream.is_multiple_of(10) && (100.0..130.0).contains(&(t % 300.0)) {
        base + 20.0 + 30.0 * rng.unit()
    } else {
        base
    }
}

/// Runs the benchmark.
pub fn run(opts: &DetectBenchOptions) -> DetectBenchResult {
    let steps = opts.seconds * 10;
    let mut rng = SimRng::new(1);
    let mut detectors: Vec<Detector> = (0..opts.streams)
        .map(|_| Detector::new(Params::default()))
        .collect();
    // Samples are made ahead, so that only detection is timed.
    let chunk = 600u32.min(steps);
    let mut samples: u64 = 0;
    let mut events = 0usize;
    let mut timed = 0.0;
    let mut batch: Vec<Sample> = Vec::with_capacity((chunk * opts.streams) as usize);
    let mut step = 0u32;
    while step < steps {
        let upto = (step + chunk).min(steps);
        batch.clear();
        for q in step..upto {
            let t = f64::from(q) * 0.1;
            for s in 0..opts.streams {
                let lost = s.is_multiple_of(10) && (200..220).contains(&(q % 3000));
                batch.push(Sample {
                    seq: (!lost).then_some(u64::from(q)),
                    send: t,
                    delay_ms: delay(t, s, &mut rng),
                });
            }
        }
        let t0 = Instant::now();
        for (i, s) in batch.iter().enumerate() {
            if let Some(q) = s.seq {
                let d = &mut detectors[i % opts.streams as usize];
                d.push(Sample { seq: Some(q), ..*s });
                samples += 1;
            }
        }
        timed += t0.elapsed().as_secs_f64();
        for d in &mut detectors {
            events += d.take_events().len();
        }
        step = upto;
    }
    let t0 = Instant::now();
    for d in detectors {
        events += d.finish().events.len();
    }
    timed += t0.elapsed().as_secs_f64();

    // One long series (3 M samples) through the offline path.
    let long: Vec<Sample> = (0..3_000_000u64)
        .map(|q| {
            let t = q as f64 * 0.1;
            Sample {
                seq: Some(q),
                send: t,
                delay_ms: delay(t, 0, &mut rng),
            }
        })
        .collect();
    let t0 = Instant::now();
    let report = detect(&long, &Params::default());
    let offline = t0.elapsed().as_secs_f64();
    std::hint::black_box(&report);

    let rate = samples as f64 / timed.max(1e-9);
    DetectBenchResult {
        streams: opts.streams,
        samples,
        seconds: timed,
        samples_per_second: rate,
        streams_per_core: rate / 10.0,
        events,
        offline_samples_per_second: long.len() as f64 / offline.max(1e-9),
    }
}

/// Prints the results.
pub fn print_table(r: &DetectBenchResult) {
    println!(
        "detection, one core: {} streams at 10 Hz, {} samples in {:.2} s: {:.1} M samples/s ({:.0} streams per core), {} events",
        r.streams,
        r.samples,
        r.seconds,
        r.samples_per_second / 1e6,
        r.streams_per_core,
        r.events
    );
    println!(
        "one long series (offline path): {:.1} M samples/s",
        r.offline_samples_per_second / 1e6
    );
}
