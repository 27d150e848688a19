//! The comment's hidden state line: what a run remembers (the verdict of
//! every channel, within a budget, a digest of all of them, whether it
//! failed, the commit), signed with the marker key when one is configured,
//! and read back from a comment body that is hostile input.

use super::{Verdicts, verdicts};
use crate::marker::Key;
use crate::report::Report;
use base64::Engine as _;
use sha2::Digest as _;

const STATE_START: &str = "<!-- runwarden-state ";
const STATE_END: &str = " -->";

/// What a comment remembers of the run that wrote it.
#[derive(Debug, PartialEq)]
pub struct State {
    /// The commit it was written for.
    pub sha: Option<String>,
    /// The run's exit code (1: a FAIL, an ERROR or a planted entry left).
    pub exit: Option<i64>,
    pub verdicts: Verdicts,
    /// What the state kept of the verdicts when all of them would not
    /// fit in the comment ([`STATE_BUDGET`]).
    pub kept: Kept,
    /// SHA-256 of every verdict (kept or not): a change among those left
    /// out still shows.
    pub digest: Option<String>,
}

/// The digest of a run's verdicts, whatever a state line keeps of them.
pub(super) fn digest(v: &Verdicts) -> String {
    let json = serde_json::to_string(v).expect("verdicts serialize");
    crate::nonce::to_hex(&sha2::Sha256::digest(json.as_bytes()))
}

/// How much of a run's verdicts a state line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Every channel's.
    All,
    /// Every channel's but the PASSes: a channel not listed passed (or
    /// was not there).
    NotPass,
    /// None: even the others were too many.
    None,
}

/// The most a state line may take of a comment (its verdicts in base64
/// JSON): past it, the PASSes are left out, and past that every verdict.
pub const STATE_BUDGET: usize = 24 * 1024;

fn not_pass(v: &Verdicts) -> Verdicts {
    v.iter()
        .filter(|(_, v)| v.as_str() != "pass")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl State {
    /// What this report would remember.
    pub fn of(report: &Report, sha: Option<&str>) -> State {
        let now = verdicts(report);
        State {
            sha: sha.map(str::to_string),
            exit: Some(i64::from(report.exit_code())),
            digest: Some(digest(&now)),
            verdicts: now,
            kept: Kept::All,
        }
    }

    /// Whether a new comment would say something else: a verdict, or
    /// whether the run failed (a planted entry left turns it red with
    /// every verdict the same). Verdicts are compared as far as both
    /// states kept them.
    pub fn differs(&self, other: &State) -> bool {
        if let (Some(a), Some(b)) = (&self.digest, &other.digest) {
            return a != b || self.exit != other.exit;
        }
        let verdicts = match (self.kept, other.kept) {
            (Kept::None, _) | (_, Kept::None) => true,
            (Kept::All, Kept::All) => self.verdicts != other.verdicts,
            _ => not_pass(&self.verdicts) != not_pass(&other.verdicts),
        };
        verdicts || self.exit != other.exit
    }
}

/// What became of the state of an earlier comment.
#[derive(Debug, PartialEq)]
pub enum Stored {
    /// Well formed, and signed with the key when one is configured.
    Trusted(State),
    /// No state line, a malformed one, or (with a key) one without a
    /// valid signature: not written by this repository's runwarden.
    Untrusted,
}

fn signature(key: &Key, marker: &str, payload: &str) -> Option<String> {
    key.sign("runwarden-comment-state/1", &format!("{marker}\0{payload}"))
}

/// The state a comment body carries. `marker` is the comment's marker and
/// `at` the repository and pull request it is read on (a state written for
/// another is not this one's); with a configured `key` the state must
/// carry its signature.
pub fn comment_state(body: &str, marker: &str, key: &Key, at: &str) -> Stored {
    let parse = || -> Option<State> {
        let start = body.rfind(STATE_START)? + STATE_START.len();
        let len = body[start..].find(STATE_END)?;
        let mut words = body[start..start + len].split_whitespace();
        let payload = words.next()?;
        if key.is_configured() {
            let want = signature(key, marker, payload)?;
            let got = words.next()?;
            if !crate::marker::same(want.as_bytes(), got.as_bytes()) {
                return None;
            }
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&raw).ok()?;
        if v["at"].as_str() != Some(at) {
            return None;
        }
        let known = ["fail", "error", "authorized", "skipped", "pass"];
        let key_ok = |k: &str| {
            !k.is_empty()
                && k.len() <= 200
                && k.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'@' | b'.')
                })
        };
        let verdicts = v["verdicts"]
            .as_object()?
            .iter()
            .filter_map(|(k, v)| {
                let v = v.as_str()?;
                (key_ok(k) && known.contains(&v)).then(|| (k.clone(), v.to_string()))
            })
            .collect();
        let sha = v["sha"]
            .as_str()
            .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string);
        let exit = v["exit"].as_i64().filter(|e| matches!(e, 0 | 1));
        let kept = match v["kept"].as_str() {
            None | Some("all") => Kept::All,
            Some("not-pass") => Kept::NotPass,
            Some("none") => Kept::None,
            Some(_) => return None,
        };
        let digest = v["digest"]
            .as_str()
            .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string);
        Some(State {
            sha,
            exit,
            verdicts,
            kept,
            digest,
        })
    };
    match parse() {
        Some(s) => Stored::Trusted(s),
        None => Stored::Untrusted,
    }
}

pub(super) fn state_line(state: &State, marker: &str, key: &Key, at: &str) -> String {
    let line = |verdicts: &Verdicts, kept: &str| {
        let v = serde_json::json!({ "v": 1, "at": at, "sha": state.sha, "exit": state.exit, "kept": kept, "digest": state.digest, "verdicts": verdicts });
        let payload = base64::engine::general_purpose::STANDARD.encode(v.to_string());
        let sig = signature(key, marker, &payload)
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        format!("{STATE_START}{payload}{sig}{STATE_END}\n")
    };
    let all = line(&state.verdicts, "all");
    if all.len() <= STATE_BUDGET {
        return all;
    }
    let some = line(&not_pass(&state.verdicts), "not-pass");
    if some.len() <= STATE_BUDGET {
        return some;
    }
    line(&Verdicts::new(), "none")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Verdicts {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn state_reads_back_and_ignores_what_is_not_ours() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let now = State {
            sha: Some("0123456789abcdef0123456789abcdef01234567".into()),
            exit: Some(1),
            verdicts: v(&[("fs:file-name", "fail"), ("git:ref@inside", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        // Without a key: read back as written.
        let none = Key::new(None);
        let at = "octo/app#8";
        let line = state_line(&now, m, &none, at);
        assert_eq!(
            comment_state(&format!("text\n{line}"), m, &none, at),
            Stored::Trusted(now)
        );
        // Copied into another pull request's comment: not its state.
        assert_eq!(
            comment_state(&format!("text\n{line}"), m, &none, "octo/app#9"),
            Stored::Untrusted
        );
        // Hostile entries are dropped, a bad sha or exit is none.
        let hostile = serde_json::json!({ "at": at, "verdicts": { "<img>": "fail", "a:b": "owned", "c:d": "pass" }, "sha": "zz", "exit": 7 });
        let body = format!(
            "{STATE_START}{}{STATE_END}",
            base64::engine::general_purpose::STANDARD.encode(hostile.to_string())
        );
        let Stored::Trusted(s) = comment_state(&body, m, &none, at) else {
            panic!()
        };
        assert_eq!(s.verdicts, v(&[("c:d", "pass")]));
        assert_eq!((s.sha, s.exit), (None, None));
        assert_eq!(
            comment_state("no state here", m, &none, at),
            Stored::Untrusted
        );
        // With a key: only a state it signed, for this marker.
        let key = Key::new(Some(b"k3y-for-the-comment-test".to_vec()));
        let state = State {
            sha: None,
            exit: Some(0),
            verdicts: v(&[("a:b", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        let signed = state_line(&state, m, &key, at);
        assert!(matches!(
            comment_state(&signed, m, &key, at),
            Stored::Trusted(_)
        ));
        let other = "<!-- runwarden-comment fedcba9876543210 -->";
        assert_eq!(comment_state(&signed, other, &key, at), Stored::Untrusted);
        assert_eq!(
            comment_state(&body, m, &key, at),
            Stored::Untrusted,
            "unsigned"
        );
        let forged = signed.replacen("runwarden-state ", "runwarden-state e30=", 1);
        assert_eq!(comment_state(&forged, m, &key, at), Stored::Untrusted);
    }

    #[test]
    fn a_state_too_large_keeps_what_is_not_pass_then_nothing() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let none = Key::new(None);
        let many = |n: usize, verdict: &str| -> Verdicts {
            (0..n)
                .map(|i| (format!("s:c{i}"), verdict.to_string()))
                .collect()
        };
        let mut verdicts = many(3000, "pass");
        verdicts.insert("s:open".into(), "fail".into());
        let big = State {
            sha: None,
            exit: Some(1),
            verdicts,
            kept: Kept::All,
            digest: None,
        };
        let line = state_line(&big, m, &none, "o/r#1");
        assert!(line.len() <= STATE_BUDGET);
        let Stored::Trusted(back) = comment_state(&line, m, &none, "o/r#1") else {
            panic!()
        };
        assert_eq!(back.kept, Kept::NotPass);
        assert_eq!(back.verdicts, v(&[("s:open", "fail")]));
        assert!(!back.differs(&big), "the same run, compared as far as kept");
        let huge = State {
            sha: None,
            exit: Some(1),
            verdicts: many(3000, "fail"),
            kept: Kept::All,
            digest: None,
        };
        let Stored::Trusted(back) =
            comment_state(&state_line(&huge, m, &none, "o/r#1"), m, &none, "o/r#1")
        else {
            panic!()
        };
        assert_eq!((back.kept, back.verdicts.len()), (Kept::None, 0));
        assert!(back.differs(&huge));
    }

    #[test]
    fn a_pass_that_comes_or_goes_beyond_the_budget_still_differs() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let none = Key::new(None);
        let state = |n: usize| {
            let verdicts: Verdicts = (0..n)
                .map(|i| (format!("s:c{i}"), "pass".to_string()))
                .collect();
            State {
                sha: None,
                exit: Some(0),
                digest: Some(digest(&verdicts)),
                verdicts,
                kept: Kept::All,
            }
        };
        let Stored::Trusted(back) = comment_state(
            &state_line(&state(3000), m, &none, "o/r#1"),
            m,
            &none,
            "o/r#1",
        ) else {
            panic!()
        };
        assert_eq!(back.kept, Kept::NotPass);
        assert!(!back.differs(&state(3000)));
        assert!(
            back.differs(&state(2999)),
            "a surface of PASSes removed is a change"
        );
    }

    #[test]
    fn a_run_that_turns_red_with_the_same_verdicts_differs() {
        let s = |exit| State {
            sha: None,
            exit: Some(exit),
            verdicts: v(&[("a:b", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        assert!(s(0).differs(&s(1)));
        assert!(!s(1).differs(&s(1)));
    }
}
