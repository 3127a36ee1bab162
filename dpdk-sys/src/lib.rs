//! Raw FFI bindings to the system DPDK, generated at build time by bindgen from the headers
//! pkg-config names (`libdpdk` >= 22.11).
//!
//! DPDK's `static inline` functions (rx/tx burst, mbuf alloc/free, ...) are reached through
//! C wrappers that bindgen generates and `build.rs` compiles; they keep their original names.
//! The safe layer lives in the `dataplane` crate.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(clippy::all, unnecessary_transmutes, unsafe_op_in_unsafe_fn)]
#![allow(rustdoc::all, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

unsafe extern "C" {
    /// The calling thread's `rte_errno` (a thread-local that bindgen cannot bind).
    pub fn pint_rte_errno() -> core::ffi::c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbuf_layout_matches_dpdk() {
        // Two cache lines in DPDK 22.11; a different size means bindgen saw other cflags
        // than the C side.
        assert_eq!(core::mem::size_of::<rte_mbuf>(), 128);
        assert_eq!(core::mem::offset_of!(rte_mbuf, data_off), 16);
        assert_eq!(core::mem::offset_of!(rte_mbuf, pkt_len), 36);
        assert_eq!(core::mem::offset_of!(rte_mbuf, data_len), 40);
    }
}
