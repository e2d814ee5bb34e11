//! Reading the exported text in tests: its samples by series.

use std::collections::BTreeMap;

use super::Metrics;

/// Every sample of the OpenMetrics text: `name{labels}` → value.
pub(crate) fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect()
}

pub(crate) fn value(metrics: &Metrics, series: &str) -> f64 {
    let all = samples(&metrics.encode().unwrap());
    *all.get(series)
        .unwrap_or_else(|| panic!("no {series} in:\n{all:#?}"))
}
