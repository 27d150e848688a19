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
        let mut out = [0u8; 16];
        if s.len() != 32 {
            return Err(D::Error::custom("nonce must be 32 hex digits"));
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(D::Error::custom)?;
        }
        Ok(out)
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
    }
}
