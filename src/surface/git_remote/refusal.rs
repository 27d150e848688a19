//! What git's words mean: the remote's own access control refusing (only
//! its words, never what it quotes), git having had no credential to
//! offer, and how a failed push reads as an outcome.

use super::GitRemote;
use crate::surface::PlantOutcome;

/// Git's message without what it quotes (`'https://host/read-only-repo/'`,
/// a path): a URL or repository name must not decide what the message
/// means.
pub(super) fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        if c == '\'' {
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out.to_ascii_lowercase()
}

/// Whether git's words say the remote's own access control refused: an
/// authentication or authorization answer, a hook, a protected branch, a
/// ruleset, a local remote's own permissions. Anything else (no route, no
/// such host, a 5xx, a server-side failure to update a ref, a maintenance
/// mode) is not a refusal; nor is git having had no credential to offer
/// (see [`no_credential`]).
pub(super) fn is_refusal(text: &str) -> bool {
    let t = unquoted(text);
    if no_credential(&t) {
        return false;
    }
    [
        "returned error: 401",
        "returned error: 403",
        "authentication failed",
        "permission denied",
        "hook declined",
        "protected branch",
        "access denied",
        "permission to",
        "write access",
        // A server's word for a refused ref (`[remote rejected] (denied:
        // …)`), GitHub's rule and protection codes.
        "denied",
        "not allowed",
        "gh006",
        "gh013",
        "read-only file system",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// Git asked for a user name or password and had none to give (prompts
/// are off in runwarden's runs): no credential was offered, so nothing
/// the remote said is about what the job's own credentials may do.
pub(super) fn no_credential(t: &str) -> bool {
    [
        "could not read username",
        "could not read password",
        "terminal prompts disabled",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// An authentication failure (as opposed to an authorization refusal):
/// the remote did not accept who we are.
pub(super) fn is_auth_failure(text: &str) -> bool {
    let t = unquoted(text);
    ["returned error: 401", "authentication failed"]
        .iter()
        .any(|p| t.contains(p))
}

impl GitRemote {
    /// Whether a failure shows the remote's own access control refusing.
    /// An authentication failure is not proof when a credential helper is
    /// the only credential: the helper may work in the job and not in
    /// runwarden's runs (no prompt, no desktop keyring), and a PASS there
    /// could hide an open channel.
    pub(super) fn refused(&self, text: &str) -> bool {
        is_refusal(text) && !(is_auth_failure(text) && self.helper_only())
    }

    pub(super) fn helper_only(&self) -> bool {
        let has = |f: &dyn Fn(&str) -> bool| {
            self.settings
                .credentials
                .iter()
                .any(|(k, v)| f(k) && !v.is_empty())
        };
        has(&|k| k.starts_with("credential.") && k.ends_with("helper"))
            && !has(&|k| k.ends_with("extraheader"))
            && crate::redact::url_userinfo(&self.settings.url).is_none()
    }

    /// A failure of the whole push, as the outcome it means.
    pub(super) fn push_failure<N>(&self, reason: &str) -> PlantOutcome<N> {
        if no_credential(&unquoted(reason)) {
            PlantOutcome::Error {
                reason: format!(
                    "the remote asked for credentials and runwarden had none to give (no extraheader, credential helper or URL userinfo reached it): cannot tell whether the job could push ({reason})"
                ),
            }
        } else if self.refused(reason) {
            PlantOutcome::Refused {
                reason: format!("the remote refused the push: {reason}"),
            }
        } else if is_refusal(reason) {
            PlantOutcome::Error {
                reason: format!(
                    "authentication failed and the only credential is a credential helper, which may work in the job but not here: cannot tell whether the job could push ({reason})"
                ),
            }
        } else {
            PlantOutcome::Error {
                reason: format!(
                    "remote unreachable: push to {} failed: {reason}",
                    self.settings.shown
                ),
            }
        }
    }
}

/// Whether a failed push's message says it failed before git sent
/// anything: no repository at the URL, or no connection to its host. Then
/// nothing was made, and the plant's journal takes its refs back (a
/// timeout or a reset mid-transfer may have made them: those stay
/// journalled for cleanup).
pub(super) fn nothing_sent(reason: &str) -> bool {
    const BEFORE: &[&str] = &[
        "does not appear to be a git repository",
        "repository not found",
        "could not resolve host",
        "failed to connect",
        "connection refused",
        "returned error: 404",
    ];
    let r = reason.to_ascii_lowercase();
    BEFORE.iter().any(|m| r.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_remotes_own_refusals_are_refusals() {
        for refusal in [
            "fatal: unable to access 'https://h/r.git/': The requested URL returned error: 403",
            "[remote rejected] (pre-receive hook declined)",
            "[remote rejected] (protected branch hook declined)",
            "remote: Permission to o/r.git denied to github-actions[bot].",
            "[remote rejected] (denied: you may not push here)",
            "remote: error: GH013: Repository rule violations found",
        ] {
            assert!(is_refusal(refusal), "{refusal}");
        }
        for other in [
            // A repository or URL whose name reads like a refusal.
            "fatal: unable to access 'https://h/org/read-only-mirror.git/': Could not resolve host: h",
            "fatal: unable to access 'https://h/access-denied.git/': Connection timed out",
            // No credential was offered at all.
            "fatal: could not read Username for 'https://h': terminal prompts disabled",
            // Server-side failures of one ref.
            "[remote rejected] (failed to update ref)",
            "[remote rejected] (unpacker error)",
            "remote: Repository is temporarily read-only for maintenance",
            "fatal: The requested URL returned error: 502",
        ] {
            assert!(!is_refusal(other), "{other}");
        }
    }
}
