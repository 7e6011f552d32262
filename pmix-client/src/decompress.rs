//! The decompressed view of a value a get returns: libpmix 5 compresses a string put longer
//! than 4096 bytes into a `PMIX_COMPRESSED_STRING` (OpenPMIx's compressed block: the length,
//! then a zlib stream; 4.2 sends the string whole), which the reference's get macro
//! (`PMIX_VALUE_COMPRESSED_STRING_UNPACK`) turns back into the string where it applies it
//! (5.0.11 between its own processes under PRRTE does not); this client always does, with a
//! bound on what it will inflate.

use pmix_types::{DataArray, Info, Value};

use crate::Error;

/// The longest string a compressed string value is inflated to: 256 MiB. A longer one (or a
/// block claiming one: the length comes first, and is checked before anything is inflated) is
/// refused with [`Error::Decompress`], so a small hostile value cannot make a get allocate
/// without bound. libpmix 4.2 checks no bound but the length field's.
pub const MAX_DECOMPRESSED_STRING: usize = 256 << 20;

/// `v` with every compressed string in it (itself, or the values of an info array, as a get
/// of all of a process's data returns) made a string.
pub(crate) fn readable(v: Value) -> Result<Value, Error> {
    match v {
        Value::CompressedString(block) => string_of(&block).map(Value::String),
        Value::DataArray(a) if a.items().iter().any(holds_compressed) => {
            let ty = a.elem_type();
            let items = a
                .into_items()
                .into_iter()
                .map(readable)
                .collect::<Result<Vec<_>, _>>()?;
            // Each element keeps its type (an info stays an info), so the array stays valid.
            DataArray::new(ty, items)
                .map(Value::from)
                .map_err(|e| Error::Decompress(e.to_string()))
        }
        Value::Info(i) if holds_compressed(&i.value) => {
            let Info { key, value, flags } = *i;
            Ok(Value::Info(Box::new(Info {
                key,
                value: readable(value)?,
                flags,
            })))
        }
        other => Ok(other),
    }
}

fn holds_compressed(v: &Value) -> bool {
    match v {
        Value::CompressedString(_) => true,
        Value::Info(i) => holds_compressed(&i.value),
        Value::DataArray(a) => a.items().iter().any(holds_compressed),
        _ => false,
    }
}

fn string_of(block: &[u8]) -> Result<String, Error> {
    let bytes = pmix_regex::pcompress::decompress(block, MAX_DECOMPRESSED_STRING)
        .map_err(|e| Error::Decompress(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| Error::Decompress(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::Key;

    #[test]
    fn compressed_strings_read_as_strings_and_bad_ones_are_refused() {
        let text = "x".repeat(5000);
        let block = pmix_regex::pcompress::compress(text.as_bytes()).unwrap();
        let v = Value::CompressedString(block.clone());
        assert_eq!(readable(v).unwrap(), Value::String(text.clone()));
        // Inside a get-everything answer too; other values are left alone.
        let infos = DataArray::from_infos([
            Info::new(
                Key::new("a").unwrap(),
                Value::CompressedString(block.clone()),
            ),
            Info::new(
                Key::new("b").unwrap(),
                Value::CompressedBytes(block.clone()),
            ),
        ]);
        let out = readable(Value::from(infos)).unwrap();
        let out: Vec<_> = out.as_array().unwrap().infos().cloned().collect();
        assert_eq!(out[0].value, Value::String(text));
        assert_eq!(out[1].value, Value::CompressedBytes(block.clone()));
        // A block claiming more than the bound is refused before inflating.
        let mut bomb = block.clone();
        bomb[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            readable(Value::CompressedString(bomb)),
            Err(Error::Decompress(_))
        ));
        assert!(matches!(
            readable(Value::CompressedString(block[..10].to_vec())),
            Err(Error::Decompress(_))
        ));
    }
}
