//! The framing of a protobuf watch stream: each event is a 4-byte
//! big-endian length, then that many bytes.

use bytes::{Buf, Bytes, BytesMut};

use super::error::ProtobufError;

/// The largest frame accepted (the API server's request size limit is
/// 3 MiB per object; a watch event adds little).
const MAX_FRAME: usize = 64 << 20;

/// Splits a protobuf watch stream into frames.
#[derive(Default)]
pub(crate) struct FrameSplitter {
    buf: BytesMut,
}

impl FrameSplitter {
    /// Appends received bytes.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete frame, if the buffered data holds one.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>, ProtobufError> {
        let Some(len) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_FRAME {
            return Err(ProtobufError(format!(
                "watch frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// True when bytes of an incomplete frame are buffered.
    pub(crate) fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// How many bytes are buffered.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_and_oversized_ones_are_refused() {
        let mut split = FrameSplitter::default();
        let mut stream = Vec::new();
        for f in [&b"abc"[..], b"", b"defgh"] {
            stream.extend((f.len() as u32).to_be_bytes());
            stream.extend(f);
        }
        let mut frames = Vec::new();
        for piece in stream.chunks(3) {
            split.push(piece);
            while let Some(f) = split.next_frame().unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(frames, [&b"abc"[..], b"", b"defgh"]);
        assert!(!split.has_partial());
        split.push(&u32::MAX.to_be_bytes());
        assert!(split.next_frame().is_err());
    }
}
