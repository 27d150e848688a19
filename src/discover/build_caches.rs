//! The remote build caches a job names, as discovery proposes them
//! (commented out: a probe writes into them): Turborepo's (`TURBO_API`,
//! with `TURBO_TOKEN` and `TURBO_TEAM`), Nx's self-hosted cache
//! (`NX_SELF_HOSTED_REMOTE_CACHE_SERVER`), Bazel's (`--remote_cache=` in
//! the workspace's `.bazelrc`) and Gradle's (`remote(HttpBuildCache)` in
//! the workspace's settings file).
//!
//! `.bazelrc` and the settings files are hostile text in the work tree (a
//! step before this one can write them): each is read as a regular file of
//! at most 1 MiB, never through a symlink, and only to propose a stanza.
//! A URL is proposed only as a URL a config takes, without userinfo
//! (credentials are never copied into a config).

use super::registries::private_url;
use super::{Candidate, Var};
use std::path::Path;

/// Turborepo's and Nx's APIs delete nothing: what a probe writes stays.
/// Proposed commented out within the commented stanza, so uncommenting
/// the stanza does not accept it unread.
const PERMANENT: &str =
    "    # permanent: true   # its API deletes nothing: what a probe writes stays\n";

/// One cache found: the tool, the stanza's name, protocol and URL, and
/// the credential lines (already indented; commented where only a guess).
struct Found {
    tool: &'static str,
    name: &'static str,
    protocol: &'static str,
    url: String,
    extra: String,
}

/// Every build cache a variable or a workspace file names, each once.
pub(super) fn build_caches(var: Var<'_>, workspace: Option<&Path>) -> Vec<Candidate> {
    let mut found = vec![];
    if let Some(api) = var("TURBO_API") {
        let team = var("TURBO_TEAMID")
            .or_else(|| var("TURBO_TEAM"))
            .filter(|t| {
                t.len() <= 100
                    && t.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        let mut extra = "    token-env: TURBO_TOKEN\n".to_string();
        if let Some(t) = team {
            extra += &format!("    team: {t}\n");
        }
        extra += PERMANENT;
        found.push(Found {
            tool: "Turborepo's remote cache (TURBO_API)",
            name: "turborepo-cache",
            protocol: "turborepo",
            url: api,
            extra,
        });
    }
    if let Some(server) = var("NX_SELF_HOSTED_REMOTE_CACHE_SERVER") {
        let mut extra = String::new();
        if var("NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN").is_some() {
            extra += "    token-env: NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN\n";
        }
        extra += PERMANENT;
        found.push(Found {
            tool: "Nx's self-hosted remote cache (NX_SELF_HOSTED_REMOTE_CACHE_SERVER)",
            name: "nx-cache",
            protocol: "nx",
            url: server,
            extra,
        });
    }
    if let Some(w) = workspace {
        found.extend(bazelrc(w));
        found.extend(gradle(w));
    }
    let mut out: Vec<Candidate> = vec![];
    for f in found {
        let Some(c) = candidate(&f) else { continue };
        if !out.iter().any(|o| o.exposure == c.exposure) {
            out.push(c);
        }
    }
    out
}

/// A workspace file's text: a regular file of at most 1 MiB, not through a
/// symlink ([`crate::sys::read_regular`]).
fn text(file: &Path) -> Option<String> {
    let bytes = crate::sys::read_regular(file, 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Bazel's `--remote_cache=<url>` (or `--remote_cache <url>`) on a line of
/// the workspace's `.bazelrc`: the last one, as Bazel takes the last.
/// Only an http(s) cache: a `grpc://` one speaks another protocol.
fn bazelrc(workspace: &Path) -> Option<Found> {
    let text = text(&workspace.join(".bazelrc"))?;
    let mut url = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            let value = match w.strip_prefix("--remote_cache") {
                Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
                Some("") => words.next().map(str::to_string),
                _ => None,
            };
            if let Some(v) = value {
                url = Some(v.trim_matches(['"', '\'']).to_string());
            }
        }
    }
    let url = url.filter(|u| u.starts_with("http://") || u.starts_with("https://"))?;
    Some(Found {
        tool: "Bazel's remote cache (--remote_cache in .bazelrc)",
        name: "bazel-cache",
        protocol: "bazel",
        url,
        extra: "    # username-env: BAZEL_CACHE_USER      # basic auth, or a bearer token:\n    # password-env: BAZEL_CACHE_PASSWORD\n    # token-env: BAZEL_CACHE_TOKEN\n".into(),
    })
}

/// Gradle's `remote(HttpBuildCache)` in the workspace's settings file:
/// the first http(s) URL quoted after it (`url = 'https://…'`,
/// `url = uri("https://…")`). A URL the build computes (an environment
/// variable, a property) is not proposed.
fn gradle(workspace: &Path) -> Option<Found> {
    let (text, at) = ["settings.gradle.kts", "settings.gradle"]
        .iter()
        .filter_map(|f| text(&workspace.join(f)))
        .find_map(|t| t.find("HttpBuildCache").map(|at| (t, at)))?;
    let after = &text[at..];
    // Within the block's first lines: a URL further on is another's.
    let window: String = after.chars().take(2000).collect();
    let url = window
        .split(['"', '\''])
        .skip(1)
        .step_by(2)
        .find(|s| s.starts_with("http://") || s.starts_with("https://"))?
        .to_string();
    Some(Found {
        tool: "Gradle's HTTP build cache (remote(HttpBuildCache) in the settings file)",
        name: "gradle-cache",
        protocol: "gradle",
        url,
        extra: "    # username-env: GRADLE_CACHE_USER     # its credentials { }, as variables\n    # password-env: GRADLE_CACHE_PASSWORD\n".into(),
    })
}

/// The proposal for `f`: none for a URL a config does not take.
fn candidate(f: &Found) -> Option<Candidate> {
    let url = private_url(f.url.trim(), "")?;
    if crate::http::check_url(&url).is_err() || url.contains(['?', '#', '$', '{']) {
        return None;
    }
    let origin = crate::http::origin(&url)?;
    // (Every protocol's entries are under the URL as a directory, as the
    // surface takes it: the exposure is that base URL.)
    let url = if url.ends_with('/') {
        url
    } else {
        format!("{url}/")
    };
    let q = serde_json::to_string(&url).expect("string serializes");
    Some(Candidate {
        why: format!(
            "{} ({origin}): every build reads entries at keys it computes from its inputs, with no listing (a build-cache, not an http-cache), and any run that may write one decides what a later build restores (cache poisoning)",
            f.tool
        ),
        entry: format!(
            "  - name: {}\n    type: build-cache\n    protocol: {}\n    url: {q}\n{}",
            f.name, f.protocol, f.extra
        ),
        skipped: Some(if f.extra.contains("permanent: true") {
            "probing writes entries this cache's API cannot delete: name it in a config (uncomment this entry in `runwarden discover`'s output) with the credential a job of this kind gets, and `permanent: true` to accept that they stay (listed by key)".into()
        } else {
            "probing writes into the cache: name it in a config (uncomment this entry in `runwarden discover`'s output) with the credential a job of this kind gets".into()
        }),
        exposure: Some(format!("build-cache:{url}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_files_name_caches_and_nothing_else() {
        let w = tempfile::tempdir().unwrap();
        std::fs::write(
            w.path().join(".bazelrc"),
            "build --remote_cache=grpc://old:9092\nbuild:ci --remote_cache=https://user:pw@cache.example:8080/bazel # note\n",
        )
        .unwrap();
        std::fs::write(
            w.path().join("settings.gradle.kts"),
            "buildCache {\n  remote(HttpBuildCache::class) {\n    url = uri(\"https://gradle.example/cache\")\n    credentials { username = \"x\" }\n  }\n}\n",
        )
        .unwrap();
        let none = |_: &str| None;
        let c = build_caches(&none, Some(w.path()));
        let ids: Vec<&str> = c.iter().map(|c| c.exposure.as_deref().unwrap()).collect();
        assert_eq!(
            ids,
            [
                "build-cache:https://cache.example:8080/bazel/",
                "build-cache:https://gradle.example/cache/"
            ]
        );
        // No userinfo copied.
        assert!(!c[0].entry.contains("pw"), "{}", c[0].entry);
        assert!(
            c[1].entry.contains("\"https://gradle.example/cache/\""),
            "{}",
            c[1].entry
        );
        // A symlinked settings file is not read; a computed URL not proposed.
        let v = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            w.path().join("settings.gradle.kts"),
            v.path().join("settings.gradle.kts"),
        )
        .unwrap();
        std::fs::write(
            v.path().join(".bazelrc"),
            "build --remote_cache=https://${CACHE_HOST}/x\n",
        )
        .unwrap();
        assert!(build_caches(&none, Some(v.path())).is_empty());
    }
}
