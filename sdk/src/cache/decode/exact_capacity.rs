//! JSON decoded with exact-capacity `Vec`s.
//!
//! serde_json tells a sequence's visitor nothing of its length, so serde
//! builds every `Vec` by pushing: the first push allocates room for four
//! elements, and later pushes double it. A cached object keeps that slack
//! for its whole life. In a Pod the one `ContainerStatus` (752 bytes in
//! k8s-openapi) sits in room for four, and a container's two `env`
//! entries, its one port and the Pod's two tolerations, one pod IP and one
//! host IP all hold room for four: 3.5 KiB of a 15 KiB Pod.
//!
//! Here the bytes are scanned once first, for the length of every array in
//! the order the arrays open; the decode then runs through a deserializer
//! that hands each sequence its length as the size hint, so `Vec`'s
//! `Deserialize` allocates it exactly. Values skipped by the target type
//! (unknown fields) are walked rather than skipped, so the arrays they
//! hold are counted in order too.
//!
//! Walking a skipped value parses it, which is stricter than serde_json's
//! skip (a number beyond `f64`'s range is an error): whenever
//! [`from_slice`] fails, serde_json decodes the bytes again on its own, so
//! the answer, value or error, is always serde_json's. The watch-line
//! decoder, which has its own fallback, asks serde_json itself.
//!
//! A hint is only ever a capacity: should the order ever be lost (a type
//! that takes raw JSON, such as `serde_json::value::RawValue`, consumes
//! arrays unseen), a sequence whose length differs from its hint turns
//! the hints off for the rest of the document, and the decoded values are
//! the same either way.

use std::{cell::Cell, fmt};

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess,
    SeqAccess, VariantAccess, Visitor,
};

use super::json_strip::skip_string;

/// The lengths of a document's arrays, in the order they open, and which
/// one the decode has reached.
struct Lengths {
    all: Vec<u32>,
    next: Cell<usize>,
    lost: Cell<bool>,
}

impl Lengths {
    /// Scans `b` for the length of every array in it. Bytes that are not
    /// JSON scan to some lengths, never a panic; the decode then reports
    /// the error.
    fn scan(b: &[u8]) -> Self {
        /// An open container: an array (its index in `all` and the commas
        /// seen in it), or an object.
        enum Open {
            Array { index: usize, commas: u32 },
            Object,
        }
        let mut all = Vec::new();
        let mut open: Vec<Open> = Vec::new();
        let mut i = 0;
        while let Some(&c) = b.get(i) {
            match c {
                b'"' => match skip_string(b, i) {
                    Some(end) => {
                        i = end;
                        continue;
                    }
                    None => break,
                },
                b'[' => {
                    open.push(Open::Array {
                        index: all.len(),
                        commas: 0,
                    });
                    all.push(0);
                }
                b'{' => open.push(Open::Object),
                b']' | b'}' => {
                    if let Some(Open::Array { index, commas }) = open.pop()
                        && let Some(length) = all.get_mut(index)
                    {
                        // `[ ]` is empty; otherwise one element more than commas
                        let last = b
                            .get(..i)
                            .and_then(|before| {
                                before.iter().rposition(|c| !c.is_ascii_whitespace())
                            })
                            .and_then(|k| b.get(k));
                        let empty = last == Some(&b'[');
                        *length = if empty { 0 } else { commas.saturating_add(1) };
                    }
                }
                b',' => {
                    if let Some(Open::Array { commas, .. }) = open.last_mut() {
                        *commas = commas.saturating_add(1);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Self {
            all,
            next: Cell::new(0),
            lost: Cell::new(false),
        }
    }

    /// The length of the next array to open, unless the order was lost.
    fn take(&self) -> Option<usize> {
        let at = self.next.get();
        self.next.set(at + 1);
        if self.lost.get() {
            return None;
        }
        self.all.get(at).map(|&n| n as usize)
    }

    /// A sequence ended after `seen` elements where `hint` said.
    fn check(&self, hint: Option<usize>, seen: usize) {
        if hint.is_some_and(|h| h != seen) {
            self.lost.set(true);
        }
    }
}

/// `T` from JSON `bytes`, as `serde_json::from_slice` decodes it, but with
/// every `Vec` in it allocated to its length: for values kept long, as a
/// cache keeps its objects. The informers decode JSON this way.
///
/// It costs one extra pass over the bytes, and saves the regrowth of every
/// `Vec` longer than four.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
///
/// let json = br#"{"spec": {"containers": [{"name": "app", "args": ["a", "b"]}]}}"#;
/// let pod: Pod = opkit::cache::from_slice_exact(json)?;
/// let spec = pod.spec.unwrap();
/// let args = spec.containers[0].args.as_ref().unwrap();
/// assert_eq!((args.len(), args.capacity()), (2, 2)); // serde_json::from_slice: (2, 4)
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
///
/// serde_json's error, for bytes that are not JSON of `T` (trailing
/// non-whitespace included).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let lengths = Lengths::scan(bytes);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let exact = T::deserialize(Exact {
        inner: &mut de,
        lengths: &lengths,
    })
    .and_then(|value| de.end().map(|()| value));
    // Skipped values are walked, which is stricter than serde_json's skip
    // (a number out of f64's range, say): on any error, serde_json decides.
    exact.or_else(|_| serde_json::from_slice(bytes))
}

/// The value `visitor` makes of the JSON object in `bytes` (trailing bytes
/// are not checked), with every `Vec` in it allocated to its length.
///
/// Unlike [`from_slice`], an error is this decode's own, with no second
/// try: walking skipped values is stricter than serde_json's skip, so the
/// caller asks serde_json before calling the bytes bad.
pub(crate) fn deserialize_map<'de, V: Visitor<'de>>(
    bytes: &'de [u8],
    visitor: V,
) -> serde_json::Result<V::Value> {
    let lengths = Lengths::scan(bytes);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Exact {
        inner: &mut de,
        lengths: &lengths,
    }
    .deserialize_map(visitor)
}

/// A deserializer, a visitor, a seed or an access, wrapped so that every
/// sequence met below it gets its length from `lengths`.
struct Exact<'l, T> {
    inner: T,
    lengths: &'l Lengths,
}

impl<'l, T> Exact<'l, T> {
    fn wrap<U>(&self, inner: U) -> Exact<'l, U> {
        Exact {
            inner,
            lengths: self.lengths,
        }
    }
}

/// Forwards `deserialize_*` methods to the inner deserializer, the visitor
/// wrapped.
macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*))*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let visitor = self.wrap(visitor);
            self.inner.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Exact<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any() deserialize_bool() deserialize_i8() deserialize_i16()
        deserialize_i32() deserialize_i64() deserialize_i128() deserialize_u8()
        deserialize_u16() deserialize_u32() deserialize_u64() deserialize_u128()
        deserialize_f32() deserialize_f64() deserialize_char() deserialize_str()
        deserialize_string() deserialize_bytes() deserialize_byte_buf()
        deserialize_option() deserialize_unit()
        deserialize_unit_struct(name: &'static str)
        deserialize_newtype_struct(name: &'static str)
        deserialize_seq() deserialize_tuple(len: usize)
        deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_map()
        deserialize_struct(name: &'static str, fields: &'static [&'static str])
        deserialize_enum(name: &'static str, variants: &'static [&'static str])
        deserialize_identifier()
    }

    /// Walks the value instead of skipping it, so the arrays in it are
    /// counted, then tells `visitor` it is done (as serde_json does).
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let walker = self.wrap(IgnoredAny);
        self.inner.deserialize_any(walker)?;
        visitor.visit_unit()
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Forwards `visit_*` methods of plain values to the inner visitor.
macro_rules! forward_visit {
    ($($method:ident($ty:ty))*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Exact<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_f64(f64) visit_char(char)
        visit_str(&str) visit_borrowed_str(&'de str) visit_string(String)
        visit_bytes(&[u8]) visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_some(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.visit_newtype_struct(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let hint = self.lengths.take();
        let seq = Sequence {
            inner: self.wrap(seq),
            hint,
            seen: 0,
        };
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let map = self.wrap(map);
        self.inner.visit_map(map)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        let data = self.wrap(data);
        self.inner.visit_enum(data)
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Exact<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let d = self.wrap(d);
        self.inner.deserialize(d)
    }
}

/// A sequence that reports its scanned length, and checks it at the end.
struct Sequence<'l, A> {
    inner: Exact<'l, A>,
    hint: Option<usize>,
    seen: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Sequence<'_, A> {
    type Error = A::Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        let seed = self.inner.wrap(seed);
        let next = self.inner.inner.next_element_seed(seed)?;
        match next {
            Some(_) => self.seen += 1,
            None => self.inner.lengths.check(self.hint, self.seen),
        }
        Ok(next)
    }

    fn size_hint(&self) -> Option<usize> {
        self.hint.map(|h| h.saturating_sub(self.seen))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Exact<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_key_seed(seed)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let seed = self.wrap(seed);
        self.inner.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'l, 'de, A: EnumAccess<'de>> EnumAccess<'de> for Exact<'l, A> {
    type Error = A::Error;
    type Variant = Exact<'l, A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), A::Error> {
        let lengths = self.lengths;
        let seed = self.wrap(seed);
        let (value, variant) = self.inner.variant_seed(seed)?;
        Ok((
            value,
            Exact {
                inner: variant,
                lengths,
            },
        ))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Exact<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        let seed = self.wrap(seed);
        self.inner.newtype_variant_seed(seed)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        let visitor = self.wrap(visitor);
        self.inner.tuple_variant(len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let visitor = self.wrap(visitor);
        self.inner.struct_variant(fields, visitor)
    }
}

#[cfg(test)]
mod tests;
