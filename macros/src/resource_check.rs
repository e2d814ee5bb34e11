//! Checking `rbac(.. on "resource[.group][/subresource]")` strings against
//! the built-in resources, with a did-you-mean for typos.

use crate::builtin_resources::{ANY_SUBRESOURCE, BUILTIN, SUBRESOURCES};

/// `Ok` if `text` (kubectl's `plural[.group][/subresource]`) names a
/// resource Kubernetes serves out of the box; otherwise what is wrong and
/// what to write instead.
pub(crate) fn check(text: &str) -> Result<(), String> {
    let (main, sub) = match text.split_once('/') {
        Some((main, sub)) => (main, Some(sub)),
        None => (text, None),
    };
    let escape = format!(
        "Name your own kinds by their type (`on MyKind`); write `unchecked({text:?})` for a \
         resource unknown at build time."
    );
    if !BUILTIN.contains(&main) {
        let hint = suggest_resource(main)
            .map(|s| format!("; did you mean {:?}?", with_sub(s, sub)))
            .unwrap_or_default();
        return Err(format!(
            "unknown resource {main:?}: not a built-in Kubernetes resource{hint} {escape}"
        ));
    }
    let Some(sub) = sub else {
        return Ok(());
    };
    let known: Vec<&str> = ANY_SUBRESOURCE
        .iter()
        .copied()
        .chain(SUBRESOURCES.iter().filter_map(|s| {
            let (m, sub) = s.split_once('/')?;
            (m == main).then_some(sub)
        }))
        .collect();
    if known.contains(&sub) {
        return Ok(());
    }
    let hint = nearest(sub, known.iter().copied())
        .map(|s| format!("; did you mean {:?}?", format!("{main}/{s}")))
        .unwrap_or_default();
    Err(format!(
        "unknown subresource {sub:?} of {main:?}{hint} (known: {}). {escape}",
        known.join(", ")
    ))
}

fn with_sub(main: &str, sub: Option<&str>) -> String {
    match sub {
        Some(sub) => format!("{main}/{sub}"),
        None => main.to_owned(),
    }
}

/// The built-in resource `main` most likely stands for: the same plural in
/// another group (`deployments` → `deployments.apps`), else the nearest by
/// edit distance.
fn suggest_resource(main: &str) -> Option<&'static str> {
    let plural = main.split_once('.').map_or(main, |(p, _)| p);
    let same_plural = BUILTIN
        .iter()
        .copied()
        .find(|b| b.split_once('.').map_or(*b, |(p, _)| p) == plural);
    same_plural.or_else(|| nearest(main, BUILTIN.iter().copied()))
}

/// The candidate closest to `text`, if it is close enough to be a typo.
fn nearest<'a>(text: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (text.len() / 3).max(2);
    candidates
        .map(|c| (distance(text, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal-string-alignment distance: insertions, deletions,
/// substitutions and swaps of neighbours each cost one.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_resources_and_subresources_pass() {
        for ok in [
            "pods",
            "pods/log",
            "deployments.apps",
            "deployments.apps/scale",
            "deployments.apps/status",
            "leases.coordination.k8s.io",
            "configmaps/finalizers",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn typos_get_a_suggestion() {
        let err = check("deploymnets.apps").unwrap_err();
        assert!(err.contains("did you mean \"deployments.apps\"?"), "{err}");
        assert!(err.contains("unchecked(\"deploymnets.apps\")"), "{err}");
        let err = check("deployments").unwrap_err();
        assert!(err.contains("did you mean \"deployments.apps\"?"), "{err}");
        let err = check("pods/logs").unwrap_err();
        assert!(err.contains("did you mean \"pods/log\"?"), "{err}");
        let err = check("secret/status").unwrap_err();
        assert!(err.contains("did you mean \"secrets/status\"?"), "{err}");
        let err = check("widgets.example.com").unwrap_err();
        assert!(!err.contains("did you mean"), "{err}");
    }

    #[test]
    fn the_table_is_sorted_and_well_formed() {
        assert!(BUILTIN.windows(2).all(|w| w[0] < w[1]));
        for s in SUBRESOURCES {
            let (main, _) = s.split_once('/').unwrap_or((s, ""));
            assert!(BUILTIN.contains(&main), "{s}");
        }
    }
}
