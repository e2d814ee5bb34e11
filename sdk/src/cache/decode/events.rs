//! A watch body, pushed chunk by chunk, decoded into events: JSON lines or
//! protobuf frames.

use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::{error::DecodeError, json, json_strip, output::WatchLine, protobuf};

/// Decodes a watch body pushed to it chunk by chunk into events.
pub(crate) enum EventDecoder<K> {
    /// JSON, one event per line.
    Json {
        lines: json::LineSplitter,
        /// `Some`: each object's `metadata.managedFields` are cut out before
        /// decoding, the line copied into this buffer (reused line to line).
        cut: Option<Vec<u8>>,
    },
    /// Protobuf, length-prefixed frames.
    Protobuf {
        frames: protobuf::FrameSplitter,
        codec: protobuf::Codec<K>,
        /// Set once the framing is lost: nothing more can be read.
        broken: bool,
    },
}

/// The largest cut line whose buffer is kept for the next one: a Pod's
/// line is ~15 KiB; a rare huge object's buffer is not held for the
/// informer's life.
const KEPT_CUT_BUFFER: usize = 64 * 1024;

/// One JSON watch line, with its object's `metadata.managedFields` cut out
/// first (into `cut`, a buffer reused from line to line) when there is a
/// buffer to cut into.
fn decode_line<K: DeserializeOwned>(
    line: &[u8],
    cut: Option<&mut Vec<u8>>,
) -> Result<WatchLine<K>, DecodeError> {
    if let Some(cut) = cut
        && json_strip::watch_line_into(line, cut)
    {
        let decoded = json::decode_watch_line(cut);
        if cut.capacity() > KEPT_CUT_BUFFER {
            *cut = Vec::new();
        }
        return decoded.map_err(DecodeError::from);
    }
    json::decode_watch_line(line).map_err(DecodeError::from)
}

impl<K: DeserializeOwned> EventDecoder<K> {
    /// Appends received bytes.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        match self {
            Self::Json { lines, .. } => lines.push(chunk),
            Self::Protobuf { frames, broken, .. } => {
                if !*broken {
                    frames.push(&chunk);
                }
            }
        }
    }

    /// The next event the buffered bytes hold, `None` when more bytes are
    /// needed. An error of one event leaves the stream readable unless
    /// [`is_broken`](Self::is_broken) says otherwise.
    pub(crate) fn next_event(&mut self) -> Option<Result<WatchLine<K>, DecodeError>> {
        match self {
            Self::Json { lines, cut } => loop {
                let line = lines.next_line()?;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(decode_line(&line, cut.as_mut()));
            },
            Self::Protobuf {
                frames,
                codec,
                broken,
            } => {
                if *broken {
                    return None;
                }
                match frames.next_frame() {
                    Ok(Some(frame)) => {
                        Some(protobuf::decode_event(codec, &frame).map_err(DecodeError::from))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        *broken = true;
                        *frames = protobuf::FrameSplitter::default();
                        Some(Err(e.into()))
                    }
                }
            }
        }
    }

    /// True once the stream's framing is lost: the transport should read no
    /// more of it.
    pub(crate) fn is_broken(&self) -> bool {
        matches!(self, Self::Protobuf { broken: true, .. })
    }

    /// The end of the body: the last event if it came without its
    /// terminator (a JSON line without newline).
    pub(crate) fn finish(&mut self) -> Option<Result<WatchLine<K>, DecodeError>> {
        match self {
            Self::Json { lines, cut } => {
                let line = lines.finish()?;
                if line.iter().all(u8::is_ascii_whitespace) {
                    return None;
                }
                Some(decode_line(&line, cut.as_mut()))
            }
            Self::Protobuf { frames, .. } => {
                if frames.has_partial() {
                    tracing::debug!(
                        buffered = frames.buffered(),
                        "protobuf watch stream ended inside a frame; treating as end of watch"
                    );
                }
                *frames = protobuf::FrameSplitter::default();
                None
            }
        }
    }

    /// Drops what is buffered (the body failed mid-stream).
    pub(crate) fn reset(&mut self) {
        match self {
            Self::Json { lines, .. } => *lines = json::LineSplitter::default(),
            Self::Protobuf { frames, .. } => *frames = protobuf::FrameSplitter::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::decode::{Encoding, Format};
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn json_events_across_chunks_blank_lines_and_a_last_line_without_newline() {
        for strip in [false, true] {
            let format = Format::<ConfigMap>::json();
            let format = if strip {
                format.without_managed_fields()
            } else {
                format
            };
            let mut d = format.events(Encoding::Json).unwrap();
            let mut events = Vec::new();
            let added = |n: &str| {
                format!(
                    r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{n}","managedFields":[{{"manager":"m"}}]}}}}}}"#
                )
            };
            let stream = format!("{}\n\n  \n{}\n{}", added("a"), added("b"), added("c"));
            for piece in stream.as_bytes().chunks(7) {
                d.push(Bytes::copy_from_slice(piece));
                while let Some(ev) = d.next_event() {
                    events.push(ev.unwrap());
                }
            }
            events.extend(d.finish().map(Result::unwrap));
            assert!(d.finish().is_none());
            let names: Vec<_> = events
                .into_iter()
                .map(|ev| match ev {
                    WatchLine::Added(cm) => {
                        // cut before decoding only when asked
                        assert_eq!(cm.metadata.managed_fields.is_none(), strip);
                        cm.metadata.name.unwrap_or_default()
                    }
                    other => panic!("unexpected {other:?}"),
                })
                .collect();
            assert_eq!(names, ["a", "b", "c"]);
            assert!(!d.is_broken());
        }
    }

    #[cfg(feature = "protobuf")]
    #[test]
    fn a_lost_protobuf_framing_breaks_the_stream_and_json_only_refuses_protobuf() {
        let codec = protobuf::codec::<ConfigMap>().unwrap();
        let mut d = Format::protobuf(codec)
            .without_managed_fields()
            .events(Encoding::Protobuf)
            .unwrap();
        d.push(Bytes::copy_from_slice(&u32::MAX.to_be_bytes()));
        assert!(matches!(
            d.next_event(),
            Some(Err(DecodeError::Protobuf(_)))
        ));
        assert!(d.is_broken());
        d.push(Bytes::from_static(b"more"));
        assert!(d.next_event().is_none());
        assert!(matches!(
            Format::<ConfigMap>::json().events(Encoding::Protobuf),
            Err(DecodeError::UnaskedProtobuf)
        ));
        let err = DecodeError::UnaskedProtobuf.into_reflector("list response");
        assert!(err.to_string().contains("protobuf"), "{err}");
    }
}
