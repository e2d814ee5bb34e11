//! The shard label of label mode: its key, each member's value, and the
//! label selectors replicas list and watch with (see the module docs,
//! "Label mode").

use super::hash::hash64;

/// The prefix of a ring's label key: `shard.opkit.dev/<ring>`.
const LABEL_PREFIX: &str = "shard.opkit.dev/";

/// The label key of `ring`: `shard.opkit.dev/<ring>`. Its name part is the
/// ring name, which [`Sharding`](super::Sharding) validates as 1 to 63
/// lowercase letters, digits and `-`, starting and ending with a letter or
/// digit: always a valid label name.
pub(crate) fn label_key(ring: &str) -> String {
    format!("{LABEL_PREFIX}{ring}")
}

/// The label value of the member `identity`: the 16 hex digits its member
/// Lease's name ends with (`<ring>-<16 hex>`). An identity may be longer
/// than a label value (63) or hold characters one cannot.
pub(crate) fn member_id(identity: &str) -> String {
    format!("{:016x}", hash64(identity.as_bytes()))
}

/// What a replica's cache lists and watches in label mode: the objects
/// labelled with its own id.
pub(crate) fn own_selector(ring: &str, identity: &str) -> String {
    format!("{}={}", label_key(ring), member_id(identity))
}

/// What a replica's stray watch lists and watches in label mode: the
/// objects whose label names none of `members` (unlabelled objects too).
/// `members` are identities; an empty set selects every object.
pub(crate) fn strays_selector<'a>(
    ring: &str,
    members: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut ids: Vec<String> = members.into_iter().map(member_id).collect();
    ids.sort();
    ids.dedup();
    let key = label_key(ring);
    if ids.is_empty() {
        // `notin ()` is no valid selector: with no member, every object
        return String::new();
    }
    format!("{key} notin ({})", ids.join(","))
}

/// Whether `name` is a valid label name (also what a non-empty label value
/// must be): 1 to 63 characters, alphanumeric at both ends, `-`, `_` and
/// `.` inside.
#[cfg(test)]
fn valid_label_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Whether `key` is a valid label key: an optional DNS-subdomain prefix
/// and `/`, then a [label name](valid_label_name).
#[cfg(test)]
pub(crate) fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    valid_label_name(name) && prefix_ok
}

/// Whether `value` is a valid label value: empty, or as a
/// [label name](valid_label_name).
#[cfg(test)]
pub(crate) fn valid_label_value(value: &str) -> bool {
    value.is_empty() || valid_label_name(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_name_the_ring_and_the_members_ids() {
        let a = member_id("a");
        let b = member_id("b");
        assert_eq!(a.len(), 16);
        assert_eq!(label_key("ring"), "shard.opkit.dev/ring");
        assert_eq!(
            own_selector("ring", "a"),
            format!("shard.opkit.dev/ring={a}")
        );
        let mut ids = [a.clone(), b.clone()];
        ids.sort();
        assert_eq!(
            strays_selector("ring", ["b", "a", "b"]),
            format!("shard.opkit.dev/ring notin ({},{})", ids[0], ids[1])
        );
        // a member's label value is its Lease name's suffix
        assert_eq!(
            super::super::member::lease_name("ring", "a"),
            format!("ring-{a}")
        );
    }

    #[test]
    fn an_empty_member_set_selects_everything() {
        assert_eq!(strays_selector("ring", []), "");
    }
}
