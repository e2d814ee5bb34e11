//! Medians and percentiles of samples; values that are not finite (a
//! figure a run could not read) are left out.

/// The median, NaN when no value is finite.
pub fn median(v: Vec<f64>) -> f64 {
    let v = sorted_finite(v);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The `p`th percentile (nearest rank), NaN when no value is finite.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let v = sorted_finite(v.to_vec());
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn sorted_finite(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles_skip_what_is_not_finite() {
        assert_eq!(median(vec![4.0, f64::NAN, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(vec![f64::NAN]).is_nan());
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
