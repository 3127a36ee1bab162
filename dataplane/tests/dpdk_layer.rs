//! The safe DPDK layer keeps what safe code cannot see alive and owned: a port belongs to
//! one `Port` value, a thread registers once, and a pool dropped while its mbufs are out
//! stays allocated. EAL runs in this test's process (once: one test function).

use dataplane::dpdk::{DpdkError, Eal, Mbuf, Mempool, Port};

fn eal_args(lcore: u32) -> Vec<String> {
    [
        "-l",
        &lcore.to_string(),
        "--file-prefix",
        &format!("pint-test-dpdk-layer-{}", std::process::id()),
        "--no-telemetry",
        "--no-shconf",
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--log-level",
        "notice",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn the_safe_layer_keeps_dpdk_objects_alive_and_owned() {
    let lcore = dataplane::resources::available_cpus()
        .into_iter()
        .min()
        .unwrap_or(0);
    let eal = Eal::init(&eal_args(lcore)).expect("EAL starts");

    // One device, one Port: a second probe of it (DPDK says it exists and gives the same
    // port id) is refused, whatever its arguments.
    let first = Port::probe(&eal, "a", "net_null0").expect("probe net_null0");
    for again in ["net_null0", "net_null0,no-rx=1"] {
        match Port::probe(&eal, "b", again) {
            Err(DpdkError::PortOwned { id, .. }) => assert_eq!(id, first.id()),
            Err(e) => panic!("{again}: {e}"),
            Ok(p) => panic!("{again}: a second Port of port {}", p.id()),
        }
    }
    // Closing the port gives its id up: DPDK hands it to the next device.
    let id = first.id();
    drop(first);
    let next = Port::probe(&eal, "c", "net_null1").expect("probe net_null1 after close");
    assert_eq!(next.id(), id, "DPDK reuses the closed port's id");
    drop(next);

    // The thread that started EAL has an lcore id: registering it would give it another.
    match eal.register_thread() {
        Err(DpdkError::ThreadRegistered(l)) => assert_eq!(l, lcore),
        Err(e) => panic!("{e}"),
        Ok(r) => panic!("EAL's own thread registered again as lcore {}", r.lcore_id),
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let reg = eal.register_thread().expect("a new thread registers");
            match eal.register_thread() {
                Err(DpdkError::ThreadRegistered(l)) => assert_eq!(l, reg.lcore_id),
                Err(e) => panic!("{e}"),
                Ok(r) => panic!("registered twice, as {} and {}", reg.lcore_id, r.lcore_id),
            }
        });
    });

    // A pool whose mbufs are all back is freed; one dropped with an mbuf out is kept, with
    // DPDK's memory, so that the mbuf stays readable and goes back to it.
    let socket = eal.socket_id() as i32;
    let pool = Mempool::new(&eal, "back", 511, 0, 2048, socket).expect("pool");
    drop(Mbuf::alloc(&pool).expect("an mbuf"));
    drop(pool);
    assert!(
        !Eal::keeps_memory_at_exit(),
        "a pool with nothing out is freed"
    );
    let pool = Mempool::new(&eal, "out", 511, 0, 2048, socket).expect("pool");
    let mut m = Mbuf::alloc(&pool).expect("an mbuf");
    assert!(m.set_len(64));
    m.data_mut().fill(0x5a);
    drop(pool);
    assert!(
        Eal::keeps_memory_at_exit(),
        "the pool of an mbuf still out is kept"
    );
    assert!(m.data().iter().all(|&b| b == 0x5a));
    drop(m);
    drop(eal);
}
