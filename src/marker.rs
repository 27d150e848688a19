//! Markers that a later job can trust: nonces derived with HMAC-SHA-256
//! from a key and the probe id, and signed beacons.
//!
//! Across jobs, `recover` must know what `plant` planted without being told:
//! every nonce is `HMAC(key, probe id | surface | carrier)`, so a recover
//! with the same probe id and key recomputes every needle, and nobody
//! without the key can make a marker that recover counts. Without a
//! configured key the key is derived from the probe id itself; then anyone
//! who knows the probe id can forge a marker, and the report says so.
//!
//! A beacon is a small signed JSON document a plant leaves on a filesystem
//! surface, saying which repository, workflow, run and job planted it and
//! when. A later job that finds a valid beacon of another probe id has
//! proof that the runner kept state between jobs.

use crate::fault::Fault;
use crate::nonce::{Nonce, to_hex};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The environment variable holding the marker key (the action's `key:`
/// input lands here too).
pub const KEY_ENV: &str = "RUNWARDEN_KEY";

/// The prefix of every beacon's file name; the probe id follows.
pub const BEACON_PREFIX: &str = ".runwarden-beacon-";

/// Longest beacon recovery reads; a real one is under 1 KiB.
pub const BEACON_MAX: usize = 4096;

/// HMAC-SHA-256 (RFC 2104): the construction is 20 lines over SHA-256 and
/// a crate for it would add two more dependencies.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Compares two byte strings in time that does not depend on where they
/// differ (a MAC check must not leak how much of a guess was right).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    // Lengths are public (a MAC's is fixed); subtle returns false for
    // slices of different lengths.
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

/// The marker key, as configured. Never printed, never written to a report
/// or receipt; only whether one was configured is.
#[derive(Clone)]
pub struct Key {
    configured: Option<Vec<u8>>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.configured.is_some() {
            "Key(configured)"
        } else {
            "Key(derived default)"
        })
    }
}

impl Key {
    /// The key from `RUNWARDEN_KEY` (an empty value counts as unset).
    pub fn from_env() -> Key {
        Key::new(std::env::var_os(KEY_ENV).map(|v| v.into_encoded_bytes()))
    }

    /// A configured key is a secret in this process from here on: it and
    /// its hex form (what child runs receive) go to [`crate::redact`].
    pub fn new(configured: Option<Vec<u8>>) -> Key {
        let configured = configured.filter(|k| !k.is_empty());
        if let Some(k) = &configured {
            crate::redact::add(&String::from_utf8_lossy(k));
            crate::redact::add(&to_hex(k));
        }
        Key { configured }
    }

    pub fn is_configured(&self) -> bool {
        self.configured.is_some()
    }

    /// The key markers of `probe_id` are signed with: the configured key,
    /// or one derived from the probe id (public: forgeable by anyone who
    /// knows the probe id).
    fn for_probe(&self, probe_id: &str) -> Vec<u8> {
        match &self.configured {
            Some(k) => k.clone(),
            None => derived_default(probe_id).to_vec(),
        }
    }

    /// The nonce of one carrier plant: `surface` is the configured surface
    /// name, `slot` the carrier (or `carrier@inside`/`@outside`).
    pub fn nonce(&self, probe_id: &str, surface: &str, slot: &str) -> Nonce {
        let msg = format!("runwarden-nonce/1\0{probe_id}\0{surface}\0{slot}");
        let mac = hmac_sha256(&self.for_probe(probe_id), msg.as_bytes());
        let mut n = [0u8; 16];
        n.copy_from_slice(&mac[..16]);
        Nonce(n)
    }

    /// A 64-bit tag (16 hex digits) over `name` for `probe_id`: a name that
    /// carries it was made by a holder of the key, so cleanup may take it
    /// for a plant even when the nonce it holds was random.
    pub fn name_tag(&self, probe_id: &str, name: &str) -> String {
        let msg = format!("runwarden-name/1\0{probe_id}\0{name}");
        to_hex(&hmac_sha256(&self.for_probe(probe_id), msg.as_bytes())[..8])
    }

    /// Whether `tag` is [`Key::name_tag`] of `name` (in constant time).
    pub fn check_name_tag(&self, probe_id: &str, name: &str, tag: &str) -> bool {
        same(self.name_tag(probe_id, name).as_bytes(), tag.as_bytes())
    }

    /// An HMAC (64 hex digits) of `msg` in `domain` with the configured
    /// key; none without one (a derived key would be public).
    pub fn sign(&self, domain: &str, msg: &str) -> Option<String> {
        let k = self.configured.as_deref()?;
        Some(to_hex(&hmac_sha256(
            k,
            format!("{domain}\0{msg}").as_bytes(),
        )))
    }

    /// What the child runs get to verify beacons: the configured key only
    /// (the derived default is recomputed from each beacon's probe id).
    pub fn configured_hex(&self) -> Option<String> {
        self.configured.as_deref().map(to_hex)
    }

    /// The inverse of [`Key::configured_hex`], in a child run.
    pub fn from_hex(hex: Option<&str>) -> Key {
        let bytes = hex.and_then(|h| {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()
        });
        Key::new(bytes)
    }
}

fn derived_default(probe_id: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"runwarden-default-key/1\0")
        .chain_update(probe_id.as_bytes())
        .finalize()
        .into()
}

/// Probe ids go into file and ref names: letters, digits, `-` and `_`,
/// starting with a letter or digit, at most 64 characters (else `Invalid`).
pub fn check_probe_id(id: &str) -> Result<(), Fault> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.as_bytes()[0].is_ascii_alphanumeric()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        // `.runwarden-beacon-<id>` is a beacon's name: a probe named
        // `beacon…` would make its markers look like beacons.
        && !id.starts_with("beacon");
    if ok {
        Ok(())
    } else {
        Err(Fault::invalid(format!(
            "probe id `{}` must be 1 to 64 letters, digits, `-` or `_`, starting with a letter or digit (and not with `beacon`)",
            crate::escape::bytes(id.as_bytes())
        )))
    }
}

/// The default probe id inside GitHub Actions: one per workflow run and
/// attempt, so a plant job and a recover job of the same run agree on it.
pub fn default_probe_id(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let run = env("GITHUB_RUN_ID").filter(|v| !v.is_empty())?;
    let attempt = env("GITHUB_RUN_ATTEMPT")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "1".into());
    let id = format!("gh-{run}-{attempt}");
    check_probe_id(&id).ok().map(|_| id)
}

/// Who planted a beacon, from the planting job's environment. Every field
/// is whatever that job's environment said: attributed, not authenticated,
/// except through the MAC of whoever holds the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_attempt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
}

impl Origin {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Origin {
        let get = |k: &str| env(k).filter(|v| !v.is_empty());
        Origin {
            repository: get("GITHUB_REPOSITORY"),
            workflow: get("GITHUB_WORKFLOW"),
            run_id: get("GITHUB_RUN_ID"),
            run_attempt: get("GITHUB_RUN_ATTEMPT"),
            job: get("GITHUB_JOB"),
            runner: get("RUNNER_NAME"),
        }
    }

    /// One line for people (not escaped: the caller escapes).
    pub fn describe(&self) -> String {
        let mut parts = vec![];
        let mut push = |label: &str, v: &Option<String>| {
            if let Some(v) = v {
                parts.push(format!("{label} {v}"));
            }
        };
        push("repository", &self.repository);
        push("workflow", &self.workflow);
        push("run", &self.run_id);
        push("attempt", &self.run_attempt);
        push("job", &self.job);
        push("runner", &self.runner);
        if parts.is_empty() {
            "no CI origin (planted outside GitHub Actions)".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The signed part of a beacon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeaconBody {
    /// Always `1`; a different version is malformed.
    pub runwarden_beacon: u32,
    pub probe_id: String,
    pub planted_at: String,
    /// Whether a configured key signed it (else the derived default).
    pub keyed: bool,
    pub origin: Origin,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Signed {
    #[serde(flatten)]
    body: BeaconBody,
    mac: String,
}

/// A beacon someone found, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// A runwarden plant made it: the MAC verifies with the key.
    Valid(BeaconBody),
    /// Well formed, but the MAC does not verify (forged, or signed with a
    /// key this run does not have), or it is unkeyed while a key is
    /// configured.
    Unverified { body: BeaconBody, why: String },
    /// Not a beacon (truncated, bad JSON, bad fields).
    Malformed(String),
}

fn mac_of(key: &[u8], body: &BeaconBody) -> String {
    let canonical = serde_json::to_vec(body).expect("beacon serializes");
    to_hex(&hmac_sha256(key, &canonical))
}

impl Key {
    /// A beacon's file content (one JSON line).
    pub fn beacon(&self, probe_id: &str, planted_at: &str, origin: Origin) -> String {
        let body = BeaconBody {
            runwarden_beacon: 1,
            probe_id: probe_id.into(),
            planted_at: planted_at.into(),
            keyed: self.is_configured(),
            origin,
        };
        let mac = mac_of(&self.for_probe(probe_id), &body);
        let mut line = serde_json::to_string(&Signed { body, mac }).expect("beacon serializes");
        line.push('\n');
        line
    }

    /// Checks a beacon's bytes. With a configured key, only beacons signed
    /// with it are valid: an unkeyed one could have been written by anyone.
    pub fn check_beacon(&self, bytes: &[u8]) -> Checked {
        if bytes.len() >= BEACON_MAX {
            return Checked::Malformed(format!("longer than {BEACON_MAX} bytes"));
        }
        let signed: Signed = match serde_json::from_slice(bytes) {
            Ok(s) => s,
            Err(e) => return Checked::Malformed(format!("not a beacon: {e}")),
        };
        let Signed { body, mac } = signed;
        if body.runwarden_beacon != 1 {
            return Checked::Malformed(format!("unknown beacon version {}", body.runwarden_beacon));
        }
        if let Err(e) = check_probe_id(&body.probe_id) {
            return Checked::Malformed(e.into_reason());
        }
        let unverified = |why: &str| Checked::Unverified {
            body: body.clone(),
            why: why.into(),
        };
        if body.keyed && !self.is_configured() {
            return unverified("signed with a key, and this run has none (set RUNWARDEN_KEY)");
        }
        if !body.keyed && self.is_configured() {
            return unverified(
                "signed with the public default key while this run has a key: anyone could have written it",
            );
        }
        let expected = mac_of(&self.for_probe(&body.probe_id), &body);
        if same(expected.as_bytes(), mac.as_bytes()) {
            Checked::Valid(body)
        } else {
            unverified("its MAC does not verify: forged, altered, or signed with another key")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(h: &str) -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
    #[test]
    fn hmac_matches_rfc_4231() {
        let cases: [(Vec<u8>, &[u8], &str); 3] = [
            (
                vec![0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, msg, want) in cases {
            assert_eq!(hmac_sha256(&key, msg).to_vec(), unhex(want));
        }
    }

    #[test]
    fn nonces_depend_on_key_probe_surface_and_slot() {
        let k = Key::new(Some(b"secret".to_vec()));
        let base = k.nonce("p1", "tmp", "file-name");
        assert_eq!(base, k.nonce("p1", "tmp", "file-name"));
        assert_ne!(base, k.nonce("p2", "tmp", "file-name"));
        assert_ne!(base, k.nonce("p1", "tmp2", "file-name"));
        assert_ne!(base, k.nonce("p1", "tmp", "file-content"));
        assert_ne!(base, Key::new(None).nonce("p1", "tmp", "file-name"));
        assert_ne!(
            base,
            Key::new(Some(b"other".to_vec())).nonce("p1", "tmp", "file-name")
        );
    }

    #[test]
    fn beacons_verify_and_reject_tampering() {
        let origin = Origin {
            repository: Some("octo/one".into()),
            ..Origin::default()
        };
        let keyed = Key::new(Some(b"k".to_vec()));
        let text = keyed.beacon("p1", "2026-11-30T00:00:00Z", origin.clone());
        assert!(
            matches!(keyed.check_beacon(text.as_bytes()), Checked::Valid(b) if b.origin == origin)
        );
        // Another key, no key, an altered field, a truncation.
        let other = Key::new(Some(b"x".to_vec()));
        assert!(matches!(
            other.check_beacon(text.as_bytes()),
            Checked::Unverified { .. }
        ));
        assert!(matches!(
            Key::new(None).check_beacon(text.as_bytes()),
            Checked::Unverified { .. }
        ));
        let altered = text.replace("octo/one", "octo/two");
        assert!(matches!(
            keyed.check_beacon(altered.as_bytes()),
            Checked::Unverified { .. }
        ));
        assert!(matches!(
            keyed.check_beacon(&text.as_bytes()[..text.len() / 2]),
            Checked::Malformed(_)
        ));
        // Unkeyed beacons verify without a key, and are not trusted with one.
        let open = Key::new(None).beacon("p2", "t", Origin::default());
        assert!(matches!(
            Key::new(None).check_beacon(open.as_bytes()),
            Checked::Valid(_)
        ));
        assert!(matches!(
            keyed.check_beacon(open.as_bytes()),
            Checked::Unverified { .. }
        ));
    }

    #[test]
    fn probe_ids_are_name_safe() {
        for ok in ["gh-123-1", "a", "nightly_beacon"] {
            check_probe_id(ok).unwrap();
        }
        for bad in [
            "",
            "-x",
            ".x",
            "a/b",
            "a..b",
            "a b",
            "beacon-1",
            &"x".repeat(65),
        ] {
            assert!(check_probe_id(bad).is_err(), "{bad}");
        }
        let env = |k: &str| match k {
            "GITHUB_RUN_ID" => Some("42".into()),
            "GITHUB_RUN_ATTEMPT" => Some("3".into()),
            _ => None,
        };
        assert_eq!(default_probe_id(&env).as_deref(), Some("gh-42-3"));
        assert_eq!(default_probe_id(&|_| None), None);
    }
}
