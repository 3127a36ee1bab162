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
