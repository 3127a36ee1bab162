//! Prometheus text exposition in a stable order. The exporter renders its metric families
//! and their series in hash order, another at each scrape; the switch and the sink both
//! sort what it renders, so that two scrapes read (and diff) line for line.

/// `text` (families of comment lines and samples, separated by blank lines, as
/// `metrics-exporter-prometheus` renders them) with its families in name order and each
/// family's series in the text order of their labels, its `# HELP` and `# TYPE` lines
/// first. A series' own lines (a summary's quantiles, a histogram's buckets in `le` order,
/// then `_sum` and `_count`) keep the order they came in.
pub fn in_order(text: &str) -> String {
    let mut families: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
    for block in text.split("\n\n") {
        let (mut comments, mut samples) = (Vec::new(), Vec::new());
        for line in block.lines().filter(|l| !l.is_empty()) {
            if line.starts_with('#') {
                comments.push(line);
            } else {
                samples.push(line);
            }
        }
        if comments.is_empty() && samples.is_empty() {
            continue;
        }
        samples.sort_by_cached_key(|l| series_key(l));
        let name = comments
            .iter()
            .find_map(|c| {
                let mut words = c.split(' ').skip(1);
                matches!(words.next(), Some("HELP" | "TYPE"))
                    .then(|| words.next())
                    .flatten()
            })
            .or_else(|| samples.first().map(|s| sample_name(s)))
            .unwrap_or("");
        families.push((name, comments, samples));
    }
    families.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::with_capacity(text.len() + 1);
    for (i, (_, comments, samples)) in families.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for line in comments.iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A sample line's labels but `le` and `quantile`: the series it belongs to.
fn series_key(line: &str) -> String {
    let Some(open) = line.find('{') else {
        return String::new();
    };
    // The labels, up to the `}` outside their quoted values.
    let (mut pairs, mut pair, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in line[open + 1..].chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' | '}' if !quoted => {
                pairs.push(std::mem::take(&mut pair));
                if c == '}' {
                    break;
                }
                continue;
            }
            _ => {}
        }
        pair.push(c);
    }
    pairs.retain(|p| !(p.starts_with("le=") || p.starts_with("quantile=") || p.is_empty()));
    pairs.join(",")
}

/// The metric name a sample line begins with.
fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::in_order;

    #[test]
    fn families_and_samples_come_in_name_order() {
        let a = "# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"2\"} 1\nb_total{x=\"1\"} 2\n\n# TYPE a gauge\na 3\n\n";
        let b = "# TYPE a gauge\na 3\n\n# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"1\"} 2\nb_total{x=\"2\"} 1\n";
        let want = "# TYPE a gauge\na 3\n\n# HELP b_total B.\n# TYPE b_total counter\nb_total{x=\"1\"} 2\nb_total{x=\"2\"} 1\n";
        assert_eq!(in_order(a), want);
        assert_eq!(in_order(b), want);
        // A family without comments is placed by its samples' name.
        assert_eq!(
            in_order("c 1\n\n# TYPE a gauge\na 2\n"),
            "# TYPE a gauge\na 2\n\nc 1\n"
        );
        assert_eq!(in_order(""), "");
    }

    /// A histogram's buckets stay in `le` order, and each series' lines together.
    #[test]
    fn a_series_keeps_its_own_order() {
        let text = "# TYPE h histogram\nh_bucket{x=\"b\",le=\"2.5\"} 1\nh_bucket{x=\"b\",le=\"10\"} 2\nh_bucket{x=\"b\",le=\"+Inf\"} 2\nh_sum{x=\"b\"} 9\nh_count{x=\"b\"} 2\nh_bucket{x=\"a,}\\\"\",le=\"2.5\"} 0\nh_bucket{x=\"a,}\\\"\",le=\"+Inf\"} 1\nh_sum{x=\"a,}\\\"\"} 3\nh_count{x=\"a,}\\\"\"} 1\n";
        let want = "# TYPE h histogram\nh_bucket{x=\"a,}\\\"\",le=\"2.5\"} 0\nh_bucket{x=\"a,}\\\"\",le=\"+Inf\"} 1\nh_sum{x=\"a,}\\\"\"} 3\nh_count{x=\"a,}\\\"\"} 1\nh_bucket{x=\"b\",le=\"2.5\"} 1\nh_bucket{x=\"b\",le=\"10\"} 2\nh_bucket{x=\"b\",le=\"+Inf\"} 2\nh_sum{x=\"b\"} 9\nh_count{x=\"b\"} 2\n";
        assert_eq!(in_order(text), want);
    }
}
