//! Generates bindings to the system DPDK with bindgen and compiles the wrappers for DPDK's
//! `static inline` functions, using the same cflags pkg-config reports for both.

use std::env;
use std::path::PathBuf;

const MIN_VERSION: &str = "22.11";
const INSTALL_HINT: &str = "libdpdk >= 22.11 not found by pkg-config: install it with `apt-get install -y libdpdk-dev dpdk-dev pkg-config clang libclang-dev` (or run scripts/setup.sh)";

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=glue.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .cargo_metadata(false)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(_) => {
            // One line that says what to install; the rest of pkg-config's text is noise here.
            eprintln!("error: {INSTALL_HINT}");
            panic!("{INSTALL_HINT}");
        }
    };

    // The exact cflags pkg-config gives (including `-include rte_config.h -march=...`), used
    // for bindgen's clang and for the C wrappers alike, so struct layouts agree.
    let cflags = cflags_from_command();

    // Shared linkage: link the libraries pkg-config names; EAL loads the PMDs itself.
    for dir in &lib.link_paths {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    for name in &lib.libs {
        println!("cargo:rustc-link-lib=dylib={name}");
    }

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let wrap_src = out.join("static_fns.c");

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&cflags)
        .allowlist_function("rte_.*")
        .allowlist_type("rte_.*")
        .allowlist_var("RTE_.*")
        .allowlist_var("rte_.*")
        .allowlist_function("pint_.*")
        .blocklist_function("rte_.*_v[0-9]+")
        .blocklist_function("rte_lpm_lookupx4")
        .opaque_type("rte_arp_ipv4")
        .opaque_type("rte_arp_hdr")
        .opaque_type("rte_l2tpv2_combined_msg_hdr")
        .opaque_type("rte_gtp_psc_generic_hdr")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrap_src)
        .generate_inline_functions(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on the DPDK headers: {e}"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    let mut build = cc::Build::new();
    build
        .file(wrap_src.with_extension("c"))
        .file("glue.c")
        .include(env::current_dir().expect("cwd"))
        .opt_level(3)
        // DPDK's per-lcore variables (the lcore id the mempool cache is found by) live in
        // librte_eal, which every user of these wrappers links at load time: initial-exec
        // reads them with one load instead of a call to __tls_get_addr per burst.
        .flag("-ftls-model=initial-exec")
        .warnings(false);
    for flag in &cflags {
        build.flag(flag);
    }
    build.compile("dpdk_sys_wrappers");
}

/// The full `pkg-config --cflags libdpdk` line, split into arguments.
fn cflags_from_command() -> Vec<String> {
    let out = std::process::Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|_| panic!("{INSTALL_HINT}"));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
