//! The DPDK Environment Abstraction Layer: initialised once per process, cleaned up on drop.

use std::ffi::CString;
use std::os::raw::c_char;
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::{DpdkError, Errno, Result};

static INITIALISED: AtomicBool = AtomicBool::new(false);

/// Set once a device whose driver leaves an interrupt source behind has been probed: then
/// `rte_eal_cleanup` must not run (see [`Eal::keep_memory_at_exit`]).
static KEEP_MEMORY: AtomicBool = AtomicBool::new(false);

/// Proof that EAL is initialised; dropping it runs `rte_eal_cleanup` (unless
/// [`Eal::keep_memory_at_exit`] was called). Everything that uses DPDK (pools, ports,
/// workers) must be dropped first.
pub struct Eal {
    _private: (),
}

/// Why EAL may have failed to start, when its runtime directory is another user's: EAL
/// keeps a directory per file prefix under `/var/run/dpdk` for root, else under
/// `$XDG_RUNTIME_DIR/dpdk` or `/tmp/dpdk`, and the first user to run DPDK makes that last one
/// for themselves alone. Empty when it is not the cause (or EAL keeps no files).
#[cold]
fn runtime_dir_hint(args: &[String]) -> String {
    // SAFETY: no arguments, cannot fail.
    if unsafe { libc::geteuid() } == 0
        || args
            .iter()
            .any(|a| a == "--no-shconf" || a == "--in-memory")
    {
        return String::new();
    }
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map_or_else(
            || std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from,
        )
        .join("dpdk");
    let Ok(c) = CString::new(base.as_os_str().as_encoded_bytes()) else {
        return String::new();
    };
    // SAFETY: a NUL-terminated path.
    let usable = unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
    if !base.exists() || usable {
        return String::new();
    }
    format!(
        " (DPDK's runtime directory {} is not this user's: set XDG_RUNTIME_DIR to a directory of yours, or pass --no-shconf)",
        base.display()
    )
}

impl Eal {
    /// Initialises EAL with `args` (without the program name). Fails if EAL was already
    /// initialised in this process.
    #[cold]
    pub fn init(args: &[String]) -> Result<Eal> {
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::EalAlreadyInitialised);
        }
        let mut owned = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("pint-switch").expect("static name"));
        for a in args {
            owned.push(CString::new(a.as_str()).map_err(|_| DpdkError::NulInArgument(a.clone()))?);
        }
        // EAL may keep pointers into argv and may reorder it, so the strings are leaked
        // (once per process) and a separate pointer array is handed over.
        let owned: &'static [CString] = Box::leak(owned.into_boxed_slice());
        let argv: &'static mut [*mut c_char] = Box::leak(
            owned
                .iter()
                .map(|s| s.as_ptr() as *mut c_char)
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        // SAFETY: argv holds argc valid NUL-terminated strings that live forever.
        let ret = unsafe { dpdk_sys::rte_eal_init(argv.len() as i32, argv.as_mut_ptr()) };
        if ret < 0 {
            let errno = Errno::last();
            INITIALISED.store(false, Ordering::SeqCst);
            return Err(DpdkError::EalInit {
                errno,
                hint: runtime_dir_hint(args),
                args: args.join(" "),
            });
        }
        Ok(Eal { _private: () })
    }

    /// TSC ticks per second, as EAL measured them.
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: EAL is initialised.
        unsafe { dpdk_sys::rte_get_tsc_hz() }
    }

    /// The NUMA socket of the calling thread.
    pub fn socket_id(&self) -> u32 {
        // SAFETY: EAL is initialised.
        unsafe { dpdk_sys::rte_socket_id() }
    }

    /// Registers the calling (non-EAL) thread with EAL so that it gets an lcore id and the
    /// mempool per-lcore caches work for it. Unregisters when the guard drops (before the
    /// Eal does). Refused on a thread that has an lcore id already (EAL's own threads, or
    /// registered before): registering it again would give it a second one, and dropping
    /// that would take its first away.
    pub fn register_thread(&self) -> Result<ThreadRegistration<'_>> {
        // SAFETY: reads the calling thread's lcore id.
        let had = unsafe { dpdk_sys::rte_lcore_id() };
        if had != u32::MAX {
            return Err(DpdkError::ThreadRegistered(had));
        }
        // SAFETY: EAL is initialised; the call affects only the calling thread.
        let ret = unsafe { dpdk_sys::rte_thread_register() };
        if ret < 0 {
            return Err(DpdkError::Worker {
                lcore: u32::MAX,
                reason: format!("rte_thread_register: {}", Errno::last()),
            });
        }
        // SAFETY: reads the calling thread's lcore id.
        let lcore_id = unsafe { dpdk_sys::rte_lcore_id() };
        Ok(ThreadRegistration {
            lcore_id,
            _not_send: core::marker::PhantomData,
            _eal: core::marker::PhantomData,
        })
    }

    /// Leaves DPDK's memory mapped when the Eal drops, for the process's exit to release.
    ///
    /// DPDK 22.11's memif driver, in the server role, frees its listening socket's
    /// interrupt handle when the port closes without unregistering its callback, so EAL's
    /// interrupt thread keeps a source whose handle lives in DPDK memory. `rte_eal_cleanup`
    /// unmaps that memory while the interrupt thread still runs; if the thread wakes then
    /// (it rebuilds its wait list after each callback removed, such as the one for a
    /// departed peer), it reads the unmapped handle and the process dies with SIGSEGV after
    /// it has done its work. With the EAL options this project uses (`--in-memory`, or
    /// `--no-shconf --no-huge`) the cleanup leaves no files behind that the exit would not,
    /// so skipping it loses nothing.
    #[cold]
    pub fn keep_memory_at_exit(&self) {
        keep_memory();
    }

    /// Whether DPDK's memory stays mapped when the Eal drops ([`Eal::keep_memory_at_exit`],
    /// or a pool dropped while some of its mbufs were still out).
    pub fn keeps_memory_at_exit() -> bool {
        KEEP_MEMORY.load(Ordering::SeqCst)
    }

    /// DPDK's version string.
    pub fn version() -> String {
        // SAFETY: rte_version returns a static string.
        unsafe {
            std::ffi::CStr::from_ptr(dpdk_sys::rte_version())
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// Leaves DPDK's memory mapped at the Eal's drop (see [`Eal::keep_memory_at_exit`]).
pub(super) fn keep_memory() {
    KEEP_MEMORY.store(true, Ordering::SeqCst);
}

/// The directory EAL made for this process's runtime files (`/var/run/dpdk/PREFIX` as
/// root), if it says.
fn runtime_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: EAL is initialised; the string is EAL's own, copied before cleanup.
    unsafe {
        let p = dpdk_sys::rte_eal_get_runtime_dir();
        (!p.is_null()).then(|| {
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
                std::ffi::CStr::from_ptr(p).to_bytes(),
            ))
        })
    }
}

/// Removes runtime directory `dir` if nothing but telemetry sockets is left in it.
fn remove_runtime_dir(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let names: Vec<std::path::PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let telemetry = |p: &std::path::PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("dpdk_telemetry."))
    };
    if names.iter().all(telemetry) {
        for p in &names {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir(dir);
    }
}

impl Drop for Eal {
    #[cold]
    fn drop(&mut self) {
        let dir = runtime_dir();
        if !KEEP_MEMORY.load(Ordering::SeqCst) {
            // SAFETY: all DPDK objects borrow the Eal and are gone by now.
            unsafe { dpdk_sys::rte_eal_cleanup() };
        }
        // EAL makes the directory even when it puts nothing in it (`--in-memory`,
        // `--no-shconf`) and leaves it: one per process, thousands over time. Removed when
        // empty (files another process of the same prefix shares keep it), or when it holds
        // only telemetry sockets, which DPDK unlinks at exit, after this (so that without
        // `--no-telemetry` the directory stayed, empty). Two processes that share one file
        // prefix without shared configuration (`--no-shconf`) share these sockets' names:
        // give each its own prefix.
        if let Some(d) = dir {
            remove_runtime_dir(&d);
        }
    }
}

/// A thread's EAL registration; dropping it unregisters the thread. It borrows the Eal, so
/// it is gone before EAL is cleaned up.
pub struct ThreadRegistration<'eal> {
    /// The lcore id EAL gave the thread.
    pub lcore_id: u32,
    _not_send: core::marker::PhantomData<*const ()>,
    _eal: core::marker::PhantomData<&'eal Eal>,
}

impl Drop for ThreadRegistration<'_> {
    fn drop(&mut self) {
        // SAFETY: the thread registered itself and unregisters itself.
        unsafe { dpdk_sys::rte_thread_unregister() };
    }
}

/// The CPU's time-stamp counter: a clock that costs a few cycles to read, for the poll
/// loops (its rate is [`Eal::tsc_hz`]); the same counter the pipeline's clock reads.
pub use pipeline::clock::tsc;
