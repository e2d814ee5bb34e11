//! An image reference split the way the chart's values hold it.

use std::fmt;

use super::error::InstallerError;

/// An image reference, `repository[:tag][@sha256:digest]`, as the chart's
/// `image` values hold it.
///
/// ```
/// use cargo_opkit::installer::ImageRef;
///
/// let image = ImageRef::parse("localhost:5000/web:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")?;
/// assert_eq!(image.repository, "localhost:5000/web");
/// assert_eq!(image.tag, "v1");
/// assert!(image.digest.starts_with("sha256:"));
/// # Ok::<(), cargo_opkit::installer::InstallerError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `[host[:port]/]path`.
    pub repository: String,
    /// The tag, empty when none.
    pub tag: String,
    /// `sha256:<hex>`, empty when none.
    pub digest: String,
}

impl ImageRef {
    /// Splits and checks `image`.
    pub fn parse(image: &str) -> Result<Self, InstallerError> {
        let invalid = |reason: &str| InstallerError::InvalidImage {
            image: image.to_owned(),
            reason: reason.to_owned(),
        };
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, digest),
            None => (image, ""),
        };
        if !digest.is_empty() {
            let hex = digest
                .strip_prefix("sha256:")
                .ok_or_else(|| invalid("the digest must be sha256:<64 hex digits>"))?;
            if hex.len() != 64 || !hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
                return Err(invalid("the digest must be sha256:<64 hex digits>"));
            }
        }
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match rest[last_slash..].rfind(':') {
            Some(colon) => (&rest[..last_slash + colon], &rest[last_slash + colon + 1..]),
            None => (rest, ""),
        };
        if repository.is_empty() {
            return Err(invalid("no repository name"));
        }
        if !repository
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/:".contains(c))
            || repository.starts_with('/')
            || repository.ends_with('/')
            || repository.contains("//")
        {
            return Err(invalid(
                "the repository must be lower-case letters, digits, '.', '_', '-' and '/' (host[:port]/path)",
            ));
        }
        if rest.ends_with(':') {
            return Err(invalid("empty tag after ':'"));
        }
        if tag.len() > 128
            || !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            || tag.starts_with(['.', '-'])
        {
            return Err(invalid(
                "the tag must be up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
            ));
        }
        Ok(Self {
            repository: repository.to_owned(),
            tag: tag.to_owned(),
            digest: digest.to_owned(),
        })
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repository)?;
        if !self.tag.is_empty() {
            write!(f, ":{}", self.tag)?;
        }
        if !self.digest.is_empty() {
            write!(f, "@{}", self.digest)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_repository_tag_and_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for (image, repository, tag, digest) in [
            ("web", "web", "", ""),
            ("web:latest", "web", "latest", ""),
            ("localhost:5000/team/web", "localhost:5000/team/web", "", ""),
            ("127.0.0.1:5000/web:v1.2", "127.0.0.1:5000/web", "v1.2", ""),
            (&format!("web@{digest}"), "web", "", digest.as_str()),
            (
                &format!("r:1/web:t@{digest}"),
                "r:1/web",
                "t",
                digest.as_str(),
            ),
        ] {
            let parsed = ImageRef::parse(image).expect(image);
            assert_eq!(
                (
                    parsed.repository.as_str(),
                    parsed.tag.as_str(),
                    parsed.digest.as_str()
                ),
                (repository, tag, digest),
                "{image}"
            );
            assert_eq!(parsed.to_string(), image);
        }
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (image, says) in [
            ("", "no repository"),
            ("Web:1", "lower-case"),
            ("web:", "empty tag"),
            ("web:a b", "the tag must be"),
            ("web@sha256:abc", "64 hex"),
            ("web@md5:abc", "sha256"),
        ] {
            let error = ImageRef::parse(image).expect_err(image).to_string();
            assert!(error.contains(says), "{image}: {error}");
        }
    }
}
