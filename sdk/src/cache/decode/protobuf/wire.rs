//! The protobuf wire format as the generated decoders
//! ([`generated`](super::generated)) read it: one field at a time
//! ([`next`]), each value moved into its k8s-openapi type by the helpers
//! below, including the apimachinery types that are not plain messages
//! (`Time`, `MicroTime`, `Quantity`, `IntOrString`, `RawExtension`,
//! `FieldsV1`, apiextensions' `JSON`).
//!
//! What JSON shows decides each mapping: the decoders agree with the JSON
//! the API server writes for the same object (an empty `Time` is `null`,
//! an absent list is `None`, an empty `RawExtension` is `null`).

use std::{any::Any, collections::BTreeMap};

use k8s_openapi::{
    ByteString,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON,
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{FieldsV1, MicroTime, Time},
        runtime::RawExtension,
        util::intstr::IntOrString,
    },
    jiff::Timestamp,
};

use super::{
    codec::{Codec, Decode},
    error::ProtobufError,
};

/// What the decoders return.
pub(crate) type R<T> = Result<T, ProtobufError>;

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5.
    Fixed32(u32),
    /// Wire type 2: a string, bytes, a message or a packed list.
    Bytes(&'a [u8]),
}

fn varint(buf: &mut &[u8]) -> R<u64> {
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

fn fixed<const N: usize>(buf: &mut &[u8]) -> R<[u8; N]> {
    let Some((head, rest)) = buf.split_first_chunk::<N>() else {
        return Err(ProtobufError::new("fixed-width field runs past the end"));
    };
    *buf = rest;
    Ok(*head)
}

/// Reads one field: its number and value.
pub(crate) fn next<'a>(buf: &mut &'a [u8]) -> R<(u32, Value<'a>)> {
    let key = varint(buf)?;
    let number =
        u32::try_from(key >> 3).map_err(|_| ProtobufError::new("field number out of range"))?;
    let value = match key & 7 {
        0 => Value::Varint(varint(buf)?),
        1 => Value::Fixed64(u64::from_le_bytes(fixed(buf)?)),
        5 => Value::Fixed32(u32::from_le_bytes(fixed(buf)?)),
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
            Value::Bytes(bytes)
        }
        other => return Err(ProtobufError(format!("unsupported wire type {other}"))),
    };
    Ok((number, value))
}

fn wrong(expected: &str, got: Value<'_>) -> ProtobufError {
    let got = match got {
        Value::Varint(_) => "a varint",
        Value::Fixed64(_) => "a 64-bit value",
        Value::Fixed32(_) => "a 32-bit value",
        Value::Bytes(_) => "a length-delimited value",
    };
    ProtobufError(format!("expected {expected}, found {got}"))
}

/// A length-delimited value's bytes (a message, a string, bytes).
pub(crate) fn bytes(v: Value<'_>) -> R<&[u8]> {
    match v {
        Value::Bytes(b) => Ok(b),
        other => Err(wrong("a length-delimited value", other)),
    }
}

/// A `string`.
pub(crate) fn string(v: Value<'_>) -> R<String> {
    std::str::from_utf8(bytes(v)?)
        .map(str::to_owned)
        .map_err(|e| ProtobufError(format!("string is not UTF-8: {e}")))
}

/// A `bytes` field.
pub(crate) fn byte_string(v: Value<'_>) -> R<ByteString> {
    Ok(ByteString(bytes(v)?.to_vec()))
}

fn varint_value(v: Value<'_>) -> R<u64> {
    match v {
        Value::Varint(n) => Ok(n),
        other => Err(wrong("a varint", other)),
    }
}

/// A `bool`.
pub(crate) fn bool(v: Value<'_>) -> R<bool> {
    varint_value(v).map(|n| n != 0)
}

/// An `int32` (negative values are sign-extended to ten bytes on the
/// wire; the low 32 bits are the value).
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn i32(v: Value<'_>) -> R<i32> {
    varint_value(v).map(|n| n as u32 as i32)
}

/// An `int64`.
#[allow(clippy::cast_possible_wrap)]
pub(crate) fn i64(v: Value<'_>) -> R<i64> {
    varint_value(v).map(|n| n as i64)
}

/// A `double`.
pub(crate) fn f64(v: Value<'_>) -> R<f64> {
    match v {
        Value::Fixed64(n) => Ok(f64::from_bits(n)),
        other => Err(wrong("a 64-bit value", other)),
    }
}

/// How the elements of a packed repeated scalar are laid out.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Packed {
    /// One varint after the other (the only packed scalars the API has:
    /// integers and booleans).
    Varint,
}

/// One element of a repeated scalar, or all of them when packed.
pub(crate) fn repeated<T>(
    v: Value<'_>,
    packed: Packed,
    one: fn(Value<'_>) -> R<T>,
    out: &mut Vec<T>,
) -> R<()> {
    let Value::Bytes(mut b) = v else {
        out.push(one(v)?);
        return Ok(());
    };
    while !b.is_empty() {
        let element = match packed {
            Packed::Varint => Value::Varint(varint(&mut b)?),
        };
        out.push(one(element)?);
    }
    Ok(())
}

/// A message of one repeated string (`ExtraValue`).
pub(crate) fn strings(v: Value<'_>) -> R<Vec<String>> {
    let mut b = bytes(v)?;
    let mut out = Vec::new();
    while !b.is_empty() {
        if let (1, v) = next(&mut b)? {
            out.push(string(v)?);
        }
    }
    Ok(out)
}

/// A map entry: its key and, if present, its value.
pub(crate) fn entry(v: Value<'_>) -> R<(String, Option<Value<'_>>)> {
    let mut b = bytes(v)?;
    let (mut key, mut value) = (String::new(), None);
    while !b.is_empty() {
        match next(&mut b)? {
            (1, k) => key = string(k)?,
            (2, v) => value = Some(v),
            _ => {}
        }
    }
    Ok((key, value))
}

/// `Some(x)` unless `x` is its type's zero value (a Go field with
/// `omitempty` that JSON leaves out).
pub(crate) fn non_zero<T: Default + PartialEq>(x: T) -> Option<T> {
    (x != T::default()).then_some(x)
}

/// The list an optional list field holds, made empty if absent.
pub(crate) fn list<T>(field: &mut Option<Vec<T>>) -> &mut Vec<T> {
    field.get_or_insert_with(Vec::new)
}

/// Gives back a repeated field's spare room once its message is read:
/// each element is pushed (the wire says nothing of a field's count), so
/// the `Vec` grew by doubling from four, and a cached object would keep
/// the slack for its whole life (the JSON path allocates exactly, see
/// `decode::exact_capacity`).
pub(crate) fn fit<T>(list: &mut Vec<T>) {
    if list.capacity() > list.len() {
        list.shrink_to_fit();
    }
}

/// [`fit`] for an optional list field.
pub(crate) fn fit_list<T>(field: &mut Option<Vec<T>>) {
    if let Some(list) = field {
        fit(list);
    }
}

/// The map an optional map field holds, made empty if absent.
pub(crate) fn map<T>(field: &mut Option<BTreeMap<String, T>>) -> &mut BTreeMap<String, T> {
    field.get_or_insert_with(BTreeMap::new)
}

/// A value JSON cannot show as `null` in this place (a list element, a
/// map value), or an error naming the field.
pub(crate) fn required<T>(x: Option<T>, field: &str) -> R<T> {
    x.ok_or_else(|| missing(field))
}

/// The error of a value that cannot be absent.
pub(crate) fn missing(field: &str) -> ProtobufError {
    ProtobufError(format!("{field}: a value that cannot be empty is empty"))
}

/// A type around a JSON value, which can be `null`.
pub(crate) trait JsonValue {
    /// The value is `null` (what JSON shows for an empty one).
    fn is_null(&self) -> bool;
}

impl JsonValue for RawExtension {
    fn is_null(&self) -> bool {
        self.0.is_null()
    }
}
impl JsonValue for FieldsV1 {
    fn is_null(&self) -> bool {
        self.0.is_null()
    }
}
impl JsonValue for JSON {
    fn is_null(&self) -> bool {
        self.0.is_null()
    }
}

/// `None` for a `null` JSON value, as JSON decodes an optional field.
pub(crate) fn unless_null<T: JsonValue>(x: T) -> Option<T> {
    (!x.is_null()).then_some(x)
}

/// The `raw` field (1) of `RawExtension`, `FieldsV1` and `JSON`, parsed as
/// JSON (`null` when empty).
fn raw_json(v: Value<'_>) -> R<serde_json::Value> {
    let mut b = bytes(v)?;
    let mut raw: &[u8] = &[];
    while !b.is_empty() {
        if let (1, v) = next(&mut b)? {
            raw = bytes(v)?;
        }
    }
    if raw.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| ProtobufError(format!("embedded JSON: {e}")))
}

/// `runtime.RawExtension` (its bytes are JSON).
pub(crate) fn raw_extension(v: Value<'_>) -> R<RawExtension> {
    raw_json(v).map(RawExtension)
}

/// `metav1.FieldsV1` (managedFields' field sets, JSON).
pub(crate) fn fields_v1(v: Value<'_>) -> R<FieldsV1> {
    raw_json(v).map(FieldsV1)
}

/// apiextensions' `JSON` (defaults, examples and enums of a schema).
pub(crate) fn json(v: Value<'_>) -> R<JSON> {
    raw_json(v).map(JSON)
}

/// A message without fields, which JSON shows as `{}`.
pub(crate) fn empty_object(v: Value<'_>) -> R<serde_json::Value> {
    bytes(v)?;
    Ok(serde_json::Value::Object(serde_json::Map::new()))
}

/// `seconds` (1) and `nanos` (2) of a `Time` or `MicroTime`; `None` for
/// the zero time, which JSON shows as `null`.
fn timestamp(v: Value<'_>) -> R<Option<Timestamp>> {
    let mut b = bytes(v)?;
    let (mut seconds, mut nanos) = (0, 0);
    while !b.is_empty() {
        match next(&mut b)? {
            (1, v) => seconds = i64(v)?,
            (2, v) => nanos = i32(v)?,
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    Timestamp::new(seconds, nanos)
        .map(Some)
        .map_err(|e| ProtobufError(format!("time out of range: {e}")))
}

/// `metav1.Time` (whole seconds on the wire, as in JSON).
pub(crate) fn time(v: Value<'_>) -> R<Option<Time>> {
    timestamp(v).map(|t| t.map(Time))
}

/// `metav1.MicroTime` (microseconds, as nanoseconds on the wire).
pub(crate) fn micro_time(v: Value<'_>) -> R<Option<MicroTime>> {
    timestamp(v).map(|t| t.map(MicroTime))
}

/// `resource.Quantity`: its canonical string (field 1).
pub(crate) fn quantity(v: Value<'_>) -> R<Quantity> {
    let mut b = bytes(v)?;
    let mut s = String::new();
    while !b.is_empty() {
        if let (1, v) = next(&mut b)? {
            s = string(v)?;
        }
    }
    Ok(Quantity(s))
}

/// `intstr.IntOrString`: `type` (1) says which of `intVal` (2) and
/// `strVal` (3) it holds.
pub(crate) fn int_or_string(v: Value<'_>) -> R<IntOrString> {
    let mut b = bytes(v)?;
    let (mut is_string, mut int, mut string_value) = (false, 0, String::new());
    while !b.is_empty() {
        match next(&mut b)? {
            (1, v) => is_string = i64(v)? == 1,
            (2, v) => int = i32(v)?,
            (3, v) => string_value = string(v)?,
            _ => {}
        }
    }
    Ok(if is_string {
        IntOrString::String(string_value)
    } else {
        IntOrString::Int(int)
    })
}

/// The codec of `T` as the codec of `K` (the same type, checked by the
/// caller's `TypeId` comparison).
pub(crate) fn pick<K: 'static, T: 'static>(decode: fn(&[u8], Decode) -> R<T>) -> Option<Codec<K>> {
    (&Codec::<T>::new(decode) as &dyn Any)
        .downcast_ref::<Codec<K>>()
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_wire_type_and_rejects_truncation() {
        // field 1 "ab"; field 2 varint 150; field 3 fixed64; field 4 fixed32
        let mut buf: &[u8] = &[
            0x0a, 0x02, b'a', b'b', 0x10, 0x96, 0x01, 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0,
            0,
        ];
        assert_eq!(next(&mut buf).unwrap(), (1, Value::Bytes(b"ab")));
        assert_eq!(next(&mut buf).unwrap(), (2, Value::Varint(150)));
        assert_eq!(next(&mut buf).unwrap(), (3, Value::Fixed64(1)));
        assert_eq!(next(&mut buf).unwrap(), (4, Value::Fixed32(2)));
        assert!(buf.is_empty());
        for mut bad in [&[0x0a, 0x05, b'a'][..], &[0x80; 11], &[0x19, 1, 2], &[0x0b]] {
            assert!(next(&mut bad).is_err(), "{bad:?}");
        }
        assert!(string(Value::Varint(1)).is_err());
        assert!(string(Value::Bytes(&[0xff])).is_err());
    }

    #[test]
    fn negative_int32_and_packed_lists() {
        // -1 as an int32: ten bytes, sign-extended
        let mut buf: &[u8] = &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let (_, v) = next(&mut buf).unwrap();
        assert_eq!(i32(v).unwrap(), -1);
        let mut out = Vec::new();
        repeated(
            Value::Bytes(&[1, 0x96, 0x01]),
            Packed::Varint,
            i64,
            &mut out,
        )
        .unwrap();
        repeated(Value::Varint(3), Packed::Varint, i64, &mut out).unwrap();
        assert_eq!(out, [1, 150, 3]);
    }

    #[test]
    fn special_types_read_as_json_shows_them() {
        // IntOrString { type: 1, strVal: "80%" }
        let ios = int_or_string(Value::Bytes(&[0x08, 0x01, 0x1a, 0x03, b'8', b'0', b'%'])).unwrap();
        assert_eq!(ios, IntOrString::String("80%".into()));
        assert_eq!(
            int_or_string(Value::Bytes(&[0x10, 0x07])).unwrap(),
            IntOrString::Int(7)
        );
        assert_eq!(time(Value::Bytes(&[])).unwrap(), None);
        // MicroTime { seconds: 1, nanos: 1000 }
        let t = micro_time(Value::Bytes(&[0x08, 0x01, 0x10, 0xe8, 0x07])).unwrap();
        assert_eq!(t.unwrap().0, Timestamp::new(1, 1000).unwrap());
        assert!(raw_extension(Value::Bytes(&[])).unwrap().0.is_null());
        let raw = raw_extension(Value::Bytes(&[0x0a, 0x02, b'{', b'}'])).unwrap();
        assert_eq!(raw.0, serde_json::json!({}));
        assert!(raw_extension(Value::Bytes(&[0x0a, 0x01, b'{'])).is_err());
        assert_eq!(unless_null(RawExtension(serde_json::Value::Null)), None);
        assert_eq!(non_zero(String::new()), None);
        assert_eq!(non_zero(0_i32), None);
        assert_eq!(non_zero(false), None);
        assert_eq!(non_zero(true), Some(true));
    }
}
