//! The buckets a job names for a build cache, as discovery proposes them
//! (commented out: a probe writes into them): sccache's S3 backend
//! (`SCCACHE_BUCKET`, `SCCACHE_ENDPOINT`, `SCCACHE_S3_KEY_PREFIX`,
//! `SCCACHE_REGION`, `SCCACHE_S3_USE_SSL`), the Nx S3 cache runners of
//! the community (`NXCACHE_S3_BUCKET` with `NXCACHE_S3_ENDPOINT`,
//! `NXCACHE_S3_PREFIX`, `NXCACHE_S3_REGION`; `NX_AWS_BUCKET` with
//! `NX_AWS_ENDPOINT`, `NX_AWS_REGION`), and the `s3` object of the
//! workspace's `nx.json` (Nx's own `@nx/s3-cache`). Only where the bucket
//! is: the stanza names AWS's variables for the keys, never reads them.

use super::{Candidate, Var};
use std::path::Path;

/// Where one tool keeps its cache.
struct Bucket {
    tool: &'static str,
    name: &'static str,
    bucket: String,
    endpoint: Option<String>,
    prefix: Option<String>,
    region: Option<String>,
}

/// Every bucket a variable or `nx.json` names, each once.
pub(super) fn buckets(var: Var<'_>, workspace: Option<&Path>) -> Vec<Candidate> {
    let mut found: Vec<Bucket> = vec![];
    if let Some(b) = var("SCCACHE_BUCKET") {
        // sccache's endpoint may come without a scheme; SCCACHE_S3_USE_SSL
        // says which.
        let ssl = var("SCCACHE_S3_USE_SSL").is_none_or(|v| v != "false" && v != "0");
        let endpoint = var("SCCACHE_ENDPOINT").map(|e| {
            if e.contains("://") {
                e
            } else {
                format!("{}://{e}", if ssl { "https" } else { "http" })
            }
        });
        found.push(Bucket {
            tool: "sccache",
            name: "sccache-bucket",
            bucket: b,
            endpoint,
            prefix: var("SCCACHE_S3_KEY_PREFIX"),
            region: var("SCCACHE_REGION"),
        });
    }
    for (bucket, endpoint, prefix, region) in [
        (
            "NXCACHE_S3_BUCKET",
            "NXCACHE_S3_ENDPOINT",
            "NXCACHE_S3_PREFIX",
            "NXCACHE_S3_REGION",
        ),
        ("NX_AWS_BUCKET", "NX_AWS_ENDPOINT", "", "NX_AWS_REGION"),
    ] {
        if let Some(b) = var(bucket) {
            // `bucket/folder` names a prefix too.
            let (b, folder) = match b.split_once('/') {
                Some((b, f)) => (b.to_string(), Some(format!("{}/", f.trim_matches('/')))),
                None => (b, None),
            };
            found.push(Bucket {
                tool: "Nx's S3 cache",
                name: "nx-bucket",
                bucket: b,
                endpoint: var(endpoint),
                prefix: var(prefix).or(folder),
                region: var(region),
            });
        }
    }
    if let Some(b) = workspace.and_then(nx_json) {
        found.push(b);
    }
    let mut out: Vec<Candidate> = vec![];
    let mut seen: Vec<String> = vec![];
    for b in found {
        let Some(c) = candidate(&b, out.iter().filter(|c| c.entry.contains(b.name)).count()) else {
            continue;
        };
        if let Some(id) = &c.exposure
            && !seen.contains(id)
        {
            seen.push(id.clone());
            out.push(c);
        }
    }
    out
}

/// The `s3` object of `nx.json` (Nx's `@nx/s3-cache`): bucket, endpoint,
/// region. Read bounded; anything else in the file is left alone.
fn nx_json(workspace: &Path) -> Option<Bucket> {
    let text = crate::sys::read_regular(&workspace.join("nx.json"), 1 << 20).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let s3 = v.get("s3")?;
    let text = |k: &str| s3.get(k).and_then(|x| x.as_str()).map(String::from);
    Some(Bucket {
        tool: "Nx's @nx/s3-cache (nx.json)",
        name: "nx-bucket",
        bucket: text("bucket")?,
        endpoint: text("endpoint"),
        prefix: None,
        region: text("region"),
    })
}

/// The proposal for `b` (`nth`: how many of its name came before): none
/// for a bucket or endpoint that is no name or URL a config takes.
fn candidate(b: &Bucket, nth: usize) -> Option<Candidate> {
    let plain = |s: &str| {
        (3..=63).contains(&s.len())
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
    };
    if !plain(&b.bucket) {
        return None;
    }
    let region = b
        .region
        .clone()
        .filter(|r| !r.is_empty() && r.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    let endpoint = match &b.endpoint {
        Some(e) => e.clone(),
        None => format!(
            "https://s3.{}.amazonaws.com",
            region.as_deref().unwrap_or("us-east-1")
        ),
    };
    // (Userinfo in the endpoint is a credential: never proposed.)
    let url = crate::http::origin(&endpoint)?;
    let prefix = b
        .prefix
        .as_deref()
        .map(|p| p.trim_start_matches('/'))
        .filter(|p| {
            !p.is_empty()
                && p.len() <= 512
                && !p.chars().any(char::is_control)
                && !p.split('/').any(|s| s == "..")
        });
    let q = |s: &str| serde_json::to_string(s).expect("string serializes");
    let name = if nth == 0 {
        b.name.to_string()
    } else {
        format!("{}-{}", b.name, nth + 1)
    };
    let mut entry = format!(
        "  - name: {name}\n    type: object-store\n    url: {}\n    bucket: {}\n",
        q(&url),
        q(&b.bucket)
    );
    if let Some(p) = prefix {
        entry += &format!("    prefix: {}\n", q(p));
    }
    if let Some(r) = &region {
        entry += &format!("    region: {r}\n");
    }
    entry += "    access-key-env: AWS_ACCESS_KEY_ID\n    secret-key-env: AWS_SECRET_ACCESS_KEY\n";
    Some(Candidate {
        why: format!(
            "{}'s bucket ({url}, {}): every build writes cache entries at keys it computes from its inputs and every later build reads them, so a pull request that writes a slot first decides what the main branch restores (CVE-2025-36852)",
            b.tool,
            crate::escape::bytes(b.bucket.as_bytes())
        ),
        entry,
        skipped: Some(
            "probing writes into the bucket: name it in a config (uncomment this entry in `runwarden discover`'s output), with the keys a job of this kind gets".into(),
        ),
        exposure: Some(format!("bucket:{url}/{}", b.bucket)),
    })
}
