//! `[[ports]] impair`: loss, delay, jitter and reordering applied on a port's transmit
//! side (see `pipeline::impair`), validated with the key of any bad value.

use serde::Serialize;

use super::raw::RawImpair;
use super::{ConfigError, key_err};

/// Packets one worker holds for one impaired port by default.
pub const DEFAULT_IMPAIR_LIMIT: u32 = 8192;
/// Longest delay plus jitter, microseconds (one second).
pub const MAX_IMPAIR_DELAY_US: u64 = 1_000_000;

/// A port's impairment, as configured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImpairConfig {
    /// Share of packets dropped, 0 to 1 (exclusive).
    pub loss: f64,
    /// Delay every packet by this many microseconds.
    pub delay_us: u64,
    /// Plus or minus up to this many microseconds, uniformly and independently per packet
    /// (packets closer together than twice this may leave in another order).
    pub jitter_us: u64,
    /// Share of packets reordered, 0 to 1 (exclusive).
    pub reorder: f64,
    /// Packets held at most per worker (more are dropped as `impair_overflow`).
    pub limit: u32,
    /// Active from this many seconds after the port sends its first packet.
    pub from_s: f64,
    /// Until this many seconds after it (None: to the end).
    pub until_s: Option<f64>,
    /// Seed of the random decisions (None: from the switch ID, port and worker; each worker
    /// adds its index either way).
    pub seed: Option<u64>,
}

impl ImpairConfig {
    /// Validates `raw`; `key` is the table's path (`ports[2].impair`, a lab's `impair[0]`).
    pub fn from_raw(raw: RawImpair, key: &str) -> Result<ImpairConfig, ConfigError> {
        let k = |f: &str| format!("{key}.{f}");
        let share = |v: Option<f64>, f: &str| -> Result<f64, ConfigError> {
            let v = v.unwrap_or(0.0);
            if !(0.0..1.0).contains(&v) {
                return Err(key_err(k(f), format!("{v} must be at least 0 and below 1")));
            }
            Ok(v)
        };
        let loss = share(raw.loss, "loss")?;
        let reorder = share(raw.reorder, "reorder")?;
        let delay_us = raw.delay_us.unwrap_or(0);
        let jitter_us = raw.jitter_us.unwrap_or(0);
        if delay_us > MAX_IMPAIR_DELAY_US {
            return Err(key_err(
                k("delay_us"),
                format!("{delay_us} is above {MAX_IMPAIR_DELAY_US} (one second)"),
            ));
        }
        if jitter_us > delay_us {
            return Err(key_err(
                k("jitter_us"),
                format!(
                    "{jitter_us} is above delay_us ({delay_us}): a packet cannot leave before it arrives"
                ),
            ));
        }
        if delay_us + jitter_us > MAX_IMPAIR_DELAY_US {
            return Err(key_err(
                k("jitter_us"),
                format!("delay_us + jitter_us is above {MAX_IMPAIR_DELAY_US} (one second)"),
            ));
        }
        let limit = raw.limit.unwrap_or(DEFAULT_IMPAIR_LIMIT);
        if !(1..=1 << 20).contains(&limit) {
            return Err(key_err(k("limit"), format!("{limit} must be 1 to 1048576")));
        }
        let from_s = raw.from_s.unwrap_or(0.0);
        if !(from_s.is_finite() && from_s >= 0.0) {
            return Err(key_err(k("from_s"), format!("{from_s} must be 0 or more")));
        }
        if let Some(u) = raw.until_s
            && !(u.is_finite() && u > from_s)
        {
            return Err(key_err(
                k("until_s"),
                format!("{u} must be after from_s ({from_s})"),
            ));
        }
        if loss == 0.0 && reorder == 0.0 && delay_us == 0 {
            return Err(key_err(
                key.to_owned(),
                "does nothing: set loss, delay_us or reorder (or remove it)",
            ));
        }
        Ok(ImpairConfig {
            loss,
            delay_us,
            jitter_us,
            reorder,
            limit,
            from_s,
            until_s: raw.until_s,
            seed: raw.seed,
        })
    }

    /// The pipeline's spec for a worker whose clock runs at `tsc_hz`; `seed` when the
    /// configuration gives none.
    pub fn spec(&self, tsc_hz: u64, seed: u64) -> pipeline::impair::ImpairSpec {
        let cycles = |us: u64| (u128::from(us) * u128::from(tsc_hz) / 1_000_000) as u64;
        let at = |s: f64| (s * tsc_hz as f64) as u64;
        pipeline::impair::ImpairSpec {
            loss_threshold: pipeline::impair::ImpairSpec::threshold(self.loss),
            delay_cycles: cycles(self.delay_us),
            jitter_cycles: cycles(self.jitter_us),
            reorder_threshold: pipeline::impair::ImpairSpec::threshold(self.reorder),
            reorder_hold_cycles: cycles(1000),
            limit: self.limit as usize,
            from_cycles: at(self.from_s),
            until_cycles: self.until_s.map_or(u64::MAX, at),
            seed: self.seed.unwrap_or(seed),
        }
    }
}
