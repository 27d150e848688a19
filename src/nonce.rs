//! Nonces and probe ids, 128 bits from the operating system's generator.
//!
//! Each carrier of each surface gets its own nonce, and the control instance
//! gets yet another, so a recovered nonce names exactly one carrier: a hit
//! can never be an accident of another plant.

use rand::TryRng as _;
use serde::{Deserialize, Serialize};

/// A fresh 128-bit random value, shown as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nonce(#[serde(with = "hex16")] pub [u8; 16]);

impl Nonce {
    /// Draws a nonce from the OS generator (getrandom(2) on Linux: no /dev
    /// needed, so it also works in an empty chroot).
    pub fn generate() -> std::io::Result<Nonce> {
        let mut b = [0u8; 16];
        rand::rngs::SysRng
            .try_fill_bytes(&mut b)
            .map_err(|e| std::io::Error::other(format!("OS random generator failed: {e}")))?;
        Ok(Nonce(b))
    }

    /// The 32-digit lowercase hex form planted in text carriers.
    pub fn hex(&self) -> String {
        to_hex(&self.0)
    }

    /// The nonce whose hex form is `hex` (32 hex digits, either case);
    /// `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Nonce> {
        // (Hex digits first: a slice of a multi-byte character would
        // panic, and `from_str_radix` takes a sign.)
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Nonce(out))
    }

    /// Bytes `i..i+4` as a little-endian u32, for carriers that hold a
    /// number (timestamps, sizes) derived from the nonce.
    pub fn word(&self, i: usize) -> u32 {
        u32::from_le_bytes([self.0[i], self.0[i + 1], self.0[i + 2], self.0[i + 3]])
    }
}

/// A short random id (12 hex digits) for probes and runs. Planted names carry
/// the probe id so that leftovers of a killed probe are identifiable.
pub fn short_id() -> std::io::Result<String> {
    Ok(Nonce::generate()?.hex()[..12].to_string())
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

mod hex16 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(v: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::to_hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let s = String::deserialize(d)?;
        super::Nonce::from_hex(&s)
            .map(|n| n.0)
            .ok_or_else(|| D::Error::custom("nonce must be 32 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_fresh_and_round_trip() {
        let a = Nonce::generate().unwrap();
        let b = Nonce::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.hex().len(), 32);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Nonce>(&json).unwrap(), a);
        assert_eq!(Nonce::from_hex(&a.hex()), Some(a));
    }

    #[test]
    fn a_hostile_hex_form_is_no_nonce_and_no_panic() {
        for bad in [
            "",
            "00",
            &"g".repeat(32),
            &"é".repeat(16),
            &"0".repeat(33),
            &"+f".repeat(16),
        ] {
            assert_eq!(Nonce::from_hex(bad), None, "{bad}");
            assert!(serde_json::from_value::<Nonce>(serde_json::json!(bad)).is_err());
        }
    }
}
