//! FlowRadar: per-switch encoded flowsets (flow filter + counting table) updated on every
//! packet, and the collector's decoders (SingleDecode, network-wide FlowDecode and
//! CounterDecode), with loss analyses and a fat-tree simulation.

pub mod analysis;
pub mod cache;
pub mod check;
pub mod decode;
pub mod filter;
pub mod flowset;
pub mod key;
pub mod network;
pub mod sim;
pub mod wire;

pub use cache::{EpochCounts, FlowCache};
pub use decode::{DecodeResult, DecodedFlow, SingleDecoder, single_decode};
pub use flowset::{Cell, FlowSet, FlowSetConfig, Slots};
pub use key::FlowKey;
pub use network::{NetworkResult, network_decode};

/// Starts loading the cache line of `x` (decoders fetch the cells they will touch ahead, so
/// that cache misses overlap).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching a valid reference never faults.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            (x as *const T).cast::<i8>(),
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
