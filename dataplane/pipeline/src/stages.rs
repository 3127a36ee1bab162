//! Optional timing of the telemetry pipeline's stages (feature `stage-timing`, off by
//! default): TSC cycles per packet spent in each pass of [`crate::inband`], summed per thread,
//! for tuning the data plane stage by stage (`docs/benchmarks.md`). Without the feature the
//! marks compile to nothing.

/// The stages, in pipeline order.
pub const STAGES: [&str; 6] = ["parse", "hash", "route", "per-burst", "draw", "encode"];

#[cfg(feature = "stage-timing")]
thread_local! {
    static TOTALS: std::cell::Cell<([u64; STAGES.len()], u64)> =
        const { std::cell::Cell::new(([0; STAGES.len()], 0)) };
}

/// The counter value at a stage boundary (0 without the feature).
#[inline(always)]
pub fn mark() -> u64 {
    #[cfg(feature = "stage-timing")]
    {
        crate::clock::tsc()
    }
    #[cfg(not(feature = "stage-timing"))]
    {
        0
    }
}

/// Adds one burst of `packets` packets whose stage boundaries were `marks`.
#[inline(always)]
pub fn record(marks: &[u64; STAGES.len() + 1], packets: usize) {
    #[cfg(feature = "stage-timing")]
    TOTALS.with(|t| {
        let (mut sums, mut n) = t.get();
        for (s, w) in sums.iter_mut().zip(marks.windows(2)) {
            *s += w[1].wrapping_sub(w[0]);
        }
        n += packets as u64;
        t.set((sums, n));
    });
    #[cfg(not(feature = "stage-timing"))]
    let _ = (marks, packets);
}

/// Cycles per packet of each stage on this thread so far (None without the feature or
/// before the first packet).
pub fn cycles_per_packet() -> Option<[f64; STAGES.len()]> {
    #[cfg(feature = "stage-timing")]
    {
        let (sums, n) = TOTALS.with(|t| t.get());
        (n > 0).then(|| sums.map(|s| s as f64 / n as f64))
    }
    #[cfg(not(feature = "stage-timing"))]
    {
        None
    }
}

/// [`cycles_per_packet`] as one line (`parse 21.3, hash 2.9, ...`).
pub fn report() -> Option<String> {
    let c = cycles_per_packet()?;
    let parts: Vec<String> = STAGES
        .iter()
        .zip(c)
        .map(|(n, c)| format!("{n} {c:.1}"))
        .collect();
    Some(parts.join(", "))
}
