//! Just enough of the protobuf wire encoding to walk the fields of the
//! envelopes, lists and watch events without decoding them into messages
//! (zero-copy: a length-delimited field is a slice of the input).

use bytes::Buf;

use super::error::ProtobufError;

fn varint(buf: &mut &[u8]) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let Some((&b, rest)) = buf.split_first() else {
            return Err(ProtobufError::new("truncated varint"));
        };
        *buf = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ProtobufError::new("varint longer than 10 bytes"))
}

/// One field: its number and, for length-delimited fields, its bytes
/// (other wire types are skipped and reported as `None`).
pub(super) fn field<'a>(buf: &mut &'a [u8]) -> Result<(u32, Option<&'a [u8]>), ProtobufError> {
    let key = varint(buf)?;
    let number =
        u32::try_from(key >> 3).map_err(|_| ProtobufError::new("field number out of range"))?;
    match key & 7 {
        0 => {
            varint(buf)?;
            Ok((number, None))
        }
        1 => skip(buf, 8).map(|()| (number, None)),
        5 => skip(buf, 4).map(|()| (number, None)),
        2 => {
            let len = usize::try_from(varint(buf)?)
                .map_err(|_| ProtobufError::new("length out of range"))?;
            if len > buf.len() {
                return Err(ProtobufError::new(
                    "length-delimited field runs past the end",
                ));
            }
            let (bytes, rest) = buf.split_at(len);
            *buf = rest;
            Ok((number, Some(bytes)))
        }
        other => Err(ProtobufError(format!("unsupported wire type {other}"))),
    }
}

fn skip(buf: &mut &[u8], n: usize) -> Result<(), ProtobufError> {
    if n > buf.len() {
        return Err(ProtobufError::new("fixed-width field runs past the end"));
    }
    buf.advance(n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_and_rejects_truncated_fields() {
        // field 1, length 2, "ab"; field 2 varint 150
        let mut buf: &[u8] = &[0x0a, 0x02, b'a', b'b', 0x10, 0x96, 0x01];
        assert_eq!(field(&mut buf).unwrap(), (1, Some(&b"ab"[..])));
        assert_eq!(field(&mut buf).unwrap(), (2, None));
        assert!(buf.is_empty());
        let mut short: &[u8] = &[0x0a, 0x05, b'a'];
        assert!(field(&mut short).is_err());
        let mut endless: &[u8] = &[0x80; 11];
        assert!(field(&mut endless).is_err());
    }
}
