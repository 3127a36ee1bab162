use super::*;
use crate::pint::query::{Frequency, QuerySpec};

fn spec(
    name: &str,
    value: ValueKind,
    aggregation: Aggregation,
    bits: u32,
    frequency: f64,
) -> QuerySpec {
    QuerySpec {
        name: name.into(),
        value,
        aggregation,
        bits,
        space_budget: None,
        flow: FlowDefinition::FiveTuple,
        frequency: Frequency::Number(frequency),
        instances: None,
        scheme: None,
        max_path_length: None,
        epsilon: None,
        max_value: None,
        unit: None,
    }
}

/// Checks the invariants of a compiled plan: sets fit the budget, no overlap, no query twice
/// in a set, and every query runs on its frequency (to threshold precision).
fn check(plan: &Plan, file: &QueryFile) {
    let mut start = 0;
    for s in &plan.sets {
        assert!(s.end > start, "thresholds increase");
        let mut bits = vec![false; plan.global_bits as usize];
        let mut seen = std::collections::BTreeSet::new();
        for p in &s.placements {
            assert!(seen.insert(p.query), "query twice in one set");
            let w = plan.queries[usize::from(p.query)].width;
            for b in u32::from(p.offset)..u32::from(p.offset) + w {
                assert!((b as usize) < bits.len(), "beyond the budget");
                assert!(!bits[b as usize], "overlapping queries");
                bits[b as usize] = true;
            }
        }
        start = s.end;
    }
    assert_eq!(start, 1 << 32);
    for (f, spec) in plan.frequencies().iter().zip(&file.queries) {
        assert!(
            (f - spec.frequency.value()).abs() < 1e-6,
            "{}: {f} vs {}",
            spec.name,
            spec.frequency.value()
        );
    }
}

#[test]
fn paper_example_compiles() {
    let file = QueryFile::paper_example();
    let plan = Plan::compile(&file).unwrap();
    check(&plan, &file);
    assert_eq!(plan.sets.len(), 2, "{}", plan.describe());
    let path = plan.query_index("path").unwrap() as u16;
    let lat = plan.query_index("latency").unwrap() as u16;
    let util = plan.query_index("utilization").unwrap() as u16;
    assert_eq!(
        plan.sets[0].placements,
        vec![
            Placement {
                query: path,
                offset: 0
            },
            Placement {
                query: lat,
                offset: 8
            }
        ]
    );
    assert_eq!(plan.sets[0].end, 15 << 28);
    assert_eq!(
        plan.sets[1].placements,
        vec![
            Placement {
                query: path,
                offset: 0
            },
            Placement {
                query: util,
                offset: 8
            }
        ]
    );
    // Packets pick sets in the planned proportions.
    let n = 160_000u32;
    let util_packets = (0..n)
        .filter(|&pid| plan.select(pid).placements.iter().any(|p| p.query == util))
        .count() as f64;
    assert!(
        (util_packets / f64::from(n) - 1.0 / 16.0).abs() < 0.003,
        "{util_packets}"
    );
}

#[test]
fn wrap_around_places_what_first_fit_would_not() {
    // 0.6 + 0.6 + 0.8 = 2.0 slots of 8 bits in 16: feasible only with wrap-around.
    let file = QueryFile {
        global_bits: 16,
        queries: vec![
            spec("a", ValueKind::HopLatency, Aggregation::Max, 8, 0.6),
            spec("b", ValueKind::QueueOccupancy, Aggregation::Max, 8, 0.6),
            spec("c", ValueKind::LinkUtilization, Aggregation::Max, 8, 0.8),
        ],
    };
    let plan = Plan::compile(&file).unwrap();
    check(&plan, &file);
}

#[test]
fn mixed_widths_and_errors() {
    let file = QueryFile {
        global_bits: 24,
        queries: vec![
            spec(
                "wide",
                ValueKind::SwitchId,
                Aggregation::StaticPerFlow,
                16,
                0.5,
            ),
            spec("n1", ValueKind::HopLatency, Aggregation::Max, 8, 1.0),
            spec("n2", ValueKind::QueueOccupancy, Aggregation::Sum, 8, 0.5),
        ],
    };
    let plan = Plan::compile(&file).unwrap();
    check(&plan, &file);

    let over = QueryFile {
        global_bits: 16,
        queries: vec![
            spec("a", ValueKind::HopLatency, Aggregation::Max, 8, 1.0),
            spec("b", ValueKind::HopLatency, Aggregation::Min, 8, 1.0),
            spec("c", ValueKind::QueueOccupancy, Aggregation::Max, 8, 0.25),
        ],
    };
    let e = Plan::compile(&over).unwrap_err();
    assert!(matches!(e, PlanError::OverBudget { .. }), "{e}");
    assert!(e.to_string().contains("over by 2.000"), "{e}");

    // Fits on average but not in shape: two 12-bit queries on 16 bits at 0.6 each.
    let shape = QueryFile {
        global_bits: 16,
        queries: vec![
            spec("a", ValueKind::HopLatency, Aggregation::Max, 12, 0.6),
            spec("b", ValueKind::QueueOccupancy, Aggregation::Max, 12, 0.6),
        ],
    };
    match Plan::compile(&shape).unwrap_err() {
        PlanError::DoesNotFit { name, short, .. } => {
            assert_eq!(name, "b");
            assert!((short - 0.2).abs() < 1e-9);
        }
        e => panic!("{e}"),
    }

    let mut bad = spec(
        "lat",
        ValueKind::HopLatency,
        Aggregation::StaticPerFlow,
        8,
        1.0,
    );
    let e = Plan::compile(&QueryFile {
        global_bits: 16,
        queries: vec![bad.clone()],
    })
    .unwrap_err();
    // Named as the query file names them.
    assert!(
        e.to_string()
            .contains("hop_latency changes from packet to packet; static_per_flow needs switch_id"),
        "{e}"
    );
    bad.aggregation = Aggregation::Max;
    // A flow definition the switch does not key flows by.
    let mut by_source = bad.clone();
    by_source.flow = FlowDefinition::SrcIp;
    let e = Plan::compile(&QueryFile {
        global_bits: 16,
        queries: vec![by_source],
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("flow = \"src_ip\": the switch and the sink key every flow by its 5-tuple; only five_tuple"),
        "{e}"
    );
    bad.frequency = Frequency::Number(1.5);
    assert!(
        Plan::compile(&QueryFile {
            global_bits: 16,
            queries: vec![bad]
        })
        .unwrap_err()
        .to_string()
        .contains("frequency")
    );
    assert_eq!(
        Plan::compile(&QueryFile {
            global_bits: 65,
            queries: vec![]
        })
        .unwrap_err(),
        PlanError::BadBudget(65)
    );
    // No queries: a shim with nothing in it on every packet.
    let e = Plan::compile(&QueryFile::from_toml("global_bits = 16\n").unwrap()).unwrap_err();
    assert_eq!(e, PlanError::NoQueries);
    assert!(e.to_string().contains("[[queries]]"), "{e}");
    // Frequencies: the reason reaches the user (an untagged enum said only that no variant
    // matched).
    let with = |f: &str| {
        QueryFile::from_toml(&format!(
            "global_bits = 16\n[[queries]]\nname = \"path\"\nvalue = \"switch_id\"\naggregation = \"static_per_flow\"\nbits = 8\nfrequency = {f}\n"
        ))
    };
    for (f, want) in [
        ("\"1/0\"", "divides by zero"),
        ("\"a/b\"", "not a fraction (write 0.25 or \"1/4\")"),
        ("\"often\"", "not a fraction"),
        ("true", "a fraction of packets"),
    ] {
        let e = with(f).unwrap_err();
        assert!(e.contains(want), "{f}: {e}");
    }
    for (f, v) in [
        ("\"1/16\"", 0.0625),
        ("\"0.0625\"", 0.0625),
        ("0.5", 0.5),
        ("1", 1.0),
    ] {
        assert_eq!(with(f).unwrap().queries[0].frequency.value(), v, "{f}");
    }
}

/// Keys that do not apply to a query, and values no code can hold, are refused with the
/// reason (a release switch reloading such a file, or a sink reading it from a hello,
/// aborted on an assertion for a tiny `unit`).
#[test]
fn keys_that_do_not_apply_and_codes_out_of_range_are_refused() {
    let compile = |q: QuerySpec| {
        Plan::compile(&QueryFile {
            global_bits: 16,
            queries: vec![q],
        })
    };
    let sum = spec("s", ValueKind::HopLatency, Aggregation::Sum, 8, 1.0);
    let dynamic = spec(
        "d",
        ValueKind::HopLatency,
        Aggregation::DynamicPerFlow,
        8,
        1.0,
    );
    let path = spec("p", ValueKind::SwitchId, Aggregation::StaticPerFlow, 8, 1.0);
    let cases: Vec<(QuerySpec, &str)> = vec![
        (
            QuerySpec {
                unit: Some(1e-10),
                ..sum.clone()
            },
            "2^-30 to 2^32",
        ),
        (
            QuerySpec {
                unit: Some(1e10),
                ..sum.clone()
            },
            "2^-30 to 2^32",
        ),
        (
            QuerySpec {
                instances: Some(2),
                ..sum.clone()
            },
            "instances applies",
        ),
        (
            QuerySpec {
                max_path_length: Some(5),
                ..dynamic.clone()
            },
            "max_path_length applies",
        ),
        (
            QuerySpec {
                unit: Some(10.0),
                ..dynamic.clone()
            },
            "unit applies",
        ),
        (
            QuerySpec {
                unit: Some(10.0),
                ..path.clone()
            },
            "unit applies",
        ),
        (
            QuerySpec {
                epsilon: Some(0.1),
                ..sum.clone()
            },
            "multiplicative codes",
        ),
        (
            QuerySpec {
                max_value: Some(1e6),
                ..path.clone()
            },
            "multiplicative codes",
        ),
        (
            QuerySpec {
                epsilon: Some(0.1),
                max_value: Some(1e6),
                ..dynamic.clone()
            },
            "not both",
        ),
        (
            QuerySpec {
                epsilon: Some(1e-17),
                ..dynamic.clone()
            },
            "epsilon",
        ),
    ];
    for (q, why) in cases {
        let e = compile(q.clone()).unwrap_err().to_string();
        assert!(e.contains(why) && e.contains(&q.name), "{q:?}: {e}");
    }
    // A sum without a unit steps in its value's range: 8 bits of latency reach about 1 ms.
    let plan = compile(sum).unwrap();
    match &plan.queries[0].kind {
        QueryKind::PerPacket {
            compression: Compression::Linear(c),
            ..
        } => {
            assert_eq!(c.decompress(u64::from(c.max_code())), 255.0 * 4096.0);
        }
        other => panic!("{other:?}"),
    }
}

/// Property: for random query sets the compiler either fails with a reason or honours every
/// frequency and the budget.
#[test]
fn random_query_sets() {
    let mut rng = crate::sim_rng::SimRng::new(9);
    let mut compiled = 0;
    for _ in 0..2000 {
        let g = [8, 16, 24, 32][rng.below(4) as usize];
        let n = 1 + rng.below(5) as usize;
        let equal = rng.below(2) == 0;
        let queries: Vec<QuerySpec> = (0..n)
            .map(|i| {
                let bits = if equal {
                    8.min(g)
                } else {
                    [4, 8, 12, 16][rng.below(4) as usize].min(g)
                };
                let f = (1 + rng.below(16)) as f64 / 16.0;
                spec(
                    &format!("q{i}"),
                    ValueKind::HopLatency,
                    Aggregation::Max,
                    bits,
                    f,
                )
            })
            .collect();
        let file = QueryFile {
            global_bits: g,
            queries,
        };
        match Plan::compile(&file) {
            Ok(plan) => {
                check(&plan, &file);
                compiled += 1;
            }
            Err(PlanError::OverBudget { .. }) | Err(PlanError::DoesNotFit { .. }) => {
                if equal {
                    // With equal widths, wrap-around places everything within the budget.
                    let need: f64 = file
                        .queries
                        .iter()
                        .map(|q| q.frequency.value() * f64::from(q.bits))
                        .sum();
                    assert!(
                        need > f64::from(g) + 1e-9,
                        "equal widths that fit must compile ({need} <= {g})"
                    );
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(compiled > 500);
}

#[test]
fn per_packet_aggregates_round_trip() {
    let file = QueryFile {
        global_bits: 32,
        queries: vec![
            spec("max", ValueKind::HopLatency, Aggregation::Max, 8, 1.0),
            spec("min", ValueKind::HopLatency, Aggregation::Min, 8, 1.0),
            spec("sum", ValueKind::QueueOccupancy, Aggregation::Sum, 8, 1.0),
            QuerySpec {
                unit: None,
                ..spec("prod", ValueKind::HopLatency, Aggregation::Product, 8, 1.0)
            },
        ],
    };
    let mut file = file;
    file.queries[2].unit = Some(100.0);
    file.queries[3].max_value = Some(1e12);
    let plan = Plan::compile(&file).unwrap();
    let lat = [120, 5000, 800, 33];
    let queue = [300, 1200, 0, 4000];
    let (mut sum_max, mut sum_min, mut sum_sum, mut sum_prod) = (0.0, 0.0, 0.0, 0.0);
    let n = 20_000u32;
    for pid in 0..n {
        let mut d = 0;
        for i in 0..4 {
            let input = HopInput {
                pid,
                hop: i + 1,
                switch_id: 7,
                hop_latency_ns: lat[i],
                queue_bytes: queue[i],
                ..Default::default()
            };
            d = plan.encode(d, &input);
        }
        for (q, r) in plan.decode(pid, 4, d) {
            let Reading::Aggregate(v) = r else { panic!() };
            match q {
                0 => sum_max += v,
                1 => sum_min += v,
                2 => sum_sum += v,
                _ => sum_prod += v,
            }
        }
    }
    let m = |s: f64| s / f64::from(n);
    assert!(
        (m(sum_max) - 5000.0).abs() / 5000.0 < 0.03,
        "max {}",
        m(sum_max)
    );
    assert!(
        (m(sum_min) - 33.0).abs() / 33.0 < 0.03,
        "min {}",
        m(sum_min)
    );
    assert!(
        (m(sum_sum) - 5500.0).abs() / 5500.0 < 0.01,
        "sum {}",
        m(sum_sum)
    );
    let prod = 120.0 * 5000.0 * 800.0 * 33.0;
    assert!(
        (m(sum_prod) - prod).abs() / prod < 0.03,
        "product {}",
        m(sum_prod)
    );
}

/// A plan whose queries draw more random bits than a tape holds is refused (the slice
/// counter wrapped in release builds: later queries reused earlier ones' bits, their
/// sampling no longer independent), as is a query too rare for any packet to carry.
#[test]
fn plans_beyond_the_tape_and_queries_below_one_draw_step_are_refused() {
    let many = |n: usize| QueryFile {
        global_bits: 16,
        queries: (0..n)
            .map(|i| {
                spec(
                    &format!("q{i}"),
                    ValueKind::HopLatency,
                    Aggregation::DynamicPerFlow,
                    8,
                    1e-6,
                )
            })
            .collect(),
    };
    let ok = Plan::compile(&many(50)).expect("50 queries fit");
    assert!(ok.hop_words <= tape::MAX_TAPE_WORDS);
    let err = Plan::compile(&many(600)).unwrap_err();
    assert!(matches!(err, PlanError::TooManyDraws { .. }), "{err}");
    assert!(err.to_string().contains("fewer queries"), "{err}");
    let rare = QueryFile {
        global_bits: 16,
        queries: vec![spec(
            "rare",
            ValueKind::HopLatency,
            Aggregation::DynamicPerFlow,
            8,
            1e-10,
        )],
    };
    let err = Plan::compile(&rare).unwrap_err();
    assert!(err.to_string().contains("below 2^-32"), "{err}");
}

/// A query file from parts, each picked from good and bad values (what a switch or a peer
/// of the sink may send).
fn query_file_text(global_bits: &str, queries: &[Vec<(&str, &str)>]) -> String {
    let mut t = format!("global_bits = {global_bits}\n");
    for (i, q) in queries.iter().enumerate() {
        t.push_str(&format!("[[queries]]\nname = \"q{i}\"\n"));
        for (k, v) in q {
            t.push_str(&format!("{k} = {v}\n"));
        }
    }
    t
}

proptest::proptest! {
    /// The `query_plan` fuzz target's property on query files made of good and bad values:
    /// reading and compiling end in an error or a well-formed plan whose version does not
    /// depend on the run, never a panic.
    #[test]
    fn any_query_file_compiles_to_an_error_or_a_well_formed_plan(
        global_bits in proptest::sample::select(vec!["1", "8", "16", "16", "33", "64", "0", "65", "\"x\""]),
        queries in proptest::collection::vec(
            (
                proptest::sample::select(vec![
                    "\"switch_id\"", "\"hop_latency\"", "\"queue_occupancy\"",
                    "\"link_utilization\"", "\"ingress_port\"", "\"egress_port\"", "\"switch_id\"",
                    "\"hop_latency\"", "\"nothing\"",
                ]),
                proptest::sample::select(vec![
                    "\"static_per_flow\"", "\"dynamic_per_flow\"", "\"max\"", "\"min\"",
                    "\"sum\"", "\"product\"", "\"static_per_flow\"", "\"max\"", "\"median\"",
                ]),
                proptest::sample::select(vec!["1", "2", "4", "8", "8", "16", "0", "33", "64", "-2"]),
                proptest::sample::select(vec![
                    "1", "0.5", "0.25", "\"1/16\"", "\"15/16\"", "\"1/3\"", "0.1", "0.01",
                    "0.001", "1e-12", "0", "2", "\"3/0\"", "nan",
                ]),
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        ("frequency", "1"), ("instances", "1"), ("instances", "3"),
                        ("instances", "200"), ("instances", "0"), ("max_path_length", "5"),
                        ("max_path_length", "40"), ("max_path_length", "300"),
                        ("scheme", "\"interleaved\""), ("scheme", "\"baseline\""),
                        ("epsilon", "0.025"), ("epsilon", "0"), ("max_value", "1e6"),
                        ("max_value", "-1"), ("unit", "1000.0"), ("unit", "1e-40"),
                        ("space_budget", "4096"), ("space_budget", "0"),
                        ("flow", "\"five_tuple\""), ("flow", "\"src_ip\""), ("extra", "1"),
                    ]),
                    0..3,
                ),
            ),
            0..4,
        ),
    ) {
        let queries: Vec<Vec<(&str, &str)>> = queries
            .iter()
            .map(|(value, aggregation, bits, frequency, extra)| {
                let mut q = vec![
                    ("value", *value),
                    ("aggregation", *aggregation),
                    ("bits", *bits),
                    ("frequency", *frequency),
                ];
                q.extend(extra.iter().copied());
                q
            })
            .collect();
        let text = query_file_text(global_bits, &queries);
        if let Ok(file) = QueryFile::from_toml(&text)
            && let Ok(plan) = Plan::compile(&file)
        {
            proptest::prop_assert_eq!(plan.well_formed(), Ok(()), "{}", text);
            proptest::prop_assert_eq!(Plan::compile(&file).map(|p| p.version), Ok(plan.version));
        }
    }
}

/// The paper's plan and every plan the tests above compile keep the layout's rules.
#[test]
fn compiled_plans_are_well_formed() {
    let plan = Plan::compile(&QueryFile::paper_example()).unwrap();
    assert_eq!(plan.well_formed(), Ok(()));
    let mut broken = plan.clone();
    let twice = broken.sets[0].placements[0];
    broken.sets[0].placements.push(twice);
    assert!(broken.well_formed().is_err());
    let mut broken = plan;
    broken.sets.last_mut().unwrap().end -= 1;
    assert!(broken.well_formed().is_err());
}
