//! The build-cache surface against real caches (tests/common/buildcache.rs):
//! Debian's nginx with its DAV module as a Bazel and a Gradle HTTP cache
//! (with and without DELETE; a writer, a reader and a user that may not
//! delete), and turborepo-remote-cache (npm) on local storage and on
//! SeaweedFS. Every carrier FAILs on an open cache and PASSes with the
//! refusal said where the credential may not write; across jobs; a
//! declared channel is authorized; foreign entries are byte-identical
//! afterwards; cleanup removes what the server deletes and lists the rest
//! by key; no credential in any output.

use crate::common::buildcache::{
    NODELETE, Nginx, READER, TOKEN, TOKEN_ENV, Turbo, TurboOpts, TurboStorage, User, WRITER, env,
    nginx_present,
};
use crate::common::seaweed::{self, Seaweed};
use crate::common::{Probe, needs_tool, no_secrets, run_config};
use sha2::{Digest, Sha256};
use std::path::Path;

/// Whether nginx is here to test with (else the test says so and ends).
fn nginx() -> bool {
    !needs_tool("nginx", nginx_present(), "apt-get install nginx-light")
}

/// Every file under `dir` with the SHA-256 of its content, sorted.
fn tree(dir: &Path) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let sum = runwarden::nonce::to_hex(&Sha256::digest(std::fs::read(&p).unwrap()));
                out.push((p.strip_prefix(dir).unwrap().display().to_string(), sum));
            }
        }
    }
    out.sort();
    out
}

/// Entries of someone else's under the cache's root: an action result and
/// its blob, a Gradle entry, a file at the root.
fn foreign(root: &Path) {
    for (p, body) in [
        (
            "ac/1111111111111111111111111111111111111111111111111111111111111111",
            &b"their action result"[..],
        ),
        (
            "cas/2222222222222222222222222222222222222222222222222222222222222222",
            b"their blob",
        ),
        (
            "cache/3333333333333333333333333333333333333333333333333333333333333333",
            b"their gradle entry",
        ),
        ("readme", b"theirs"),
    ] {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, body).unwrap();
    }
}

fn verdicts(p: &Probe) -> Vec<(String, String)> {
    p.verdicts_of("cache")
}

fn pair(c: &str, v: &str) -> (String, String) {
    (c.to_string(), v.to_string())
}

fn on_nginx(
    n: &Nginx,
    protocol: &str,
    path: &str,
    user: &User,
    extra: &str,
    args: &[&str],
) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let cfg = n.config("cache", protocol, path) + extra;
    let p = run_config(dir.path(), &cfg, &env(user), args);
    no_secrets(&p, &[user.password]);
    p
}

#[test]
fn bazel_on_nginx_fails_each_carrier_and_cleanup_takes_back_only_its_own() {
    if !nginx() {
        return;
    }
    let n = Nginx::start(true);
    foreign(&n.data());
    let before = tree(&n.data());
    let p = on_nginx(&n, "bazel", "/", &WRITER, "", &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(
        verdicts(&p),
        vec![
            pair("entry-content", "fail"),
            pair("artifact-tag", "skipped"),
            pair("cas-blob", "fail")
        ],
        "{}",
        p.report
    );
    let d = p.finding("cache:entry-content")["detail"].to_string();
    assert!(
        d.contains("its output") && d.contains("holds the nonce"),
        "{d}"
    );
    // Everything it wrote is gone; what was there is as it was.
    assert_eq!(tree(&n.data()), before, "{}", p.report["cleanup"]);
    assert!(
        p.report["cleanup"]["left"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        p.report["cleanup"]
    );
}

#[test]
fn a_credential_that_may_not_write_passes_with_the_refusal_said() {
    if !nginx() {
        return;
    }
    for delete in [true, false] {
        let n = Nginx::start(delete);
        foreign(&n.data());
        let before = tree(&n.data());
        let p = on_nginx(&n, "bazel", "/", &READER, "", &["probe"]);
        assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
        for c in ["entry-content", "cas-blob"] {
            let f = p.finding(&format!("cache:{c}"));
            assert_eq!(f["verdict"], "pass", "delete: {delete}: {f}");
            assert!(f["detail"].to_string().contains("HTTP 403"), "{f}");
        }
        assert_eq!(tree(&n.data()), before);
    }
}

#[test]
fn a_credential_the_cache_does_not_take_is_an_error_never_a_refusal() {
    if !nginx() {
        return;
    }
    let n = Nginx::start(true);
    let wrong = User {
        name: "writer",
        password: "not-the-password",
    };
    let p = on_nginx(&n, "gradle", "/cache/", &wrong, "", &["probe"]);
    assert_eq!(p.verdict("cache:entry-content"), "error", "{}", p.report);
    let f = p.finding("cache:entry-content");
    assert!(f["detail"].to_string().contains("HTTP 401"), "{f}");
}

/// Gradle's cache across jobs: plant in one, recover in a later one,
/// cleanup by receipt; a declared channel is authorized.
#[test]
fn gradle_across_jobs_and_a_declared_channel() {
    if !nginx() {
        return;
    }
    let n = Nginx::start(true);
    foreign(&n.data());
    let before = tree(&n.data());
    let dir = tempfile::tempdir().unwrap();
    let cfg = n.config("cache", "gradle", "/cache/");
    let run = |args: &[&str], cfg: &str| {
        let p = run_config(dir.path(), cfg, &env(&WRITER), args);
        no_secrets(&p, &[WRITER.password]);
        p
    };
    let a = run(&["plant", "--probe-id", "bc-1"], &cfg);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    // The plant is a file of nginx's, at the agreed key: two witnesses and
    // the entry.
    assert_eq!(
        tree(&n.data()).len(),
        before.len() + 3,
        "{:?}",
        tree(&n.data())
    );
    let b = run(&["recover", "--probe-id", "bc-1"], &cfg);
    assert_eq!(b.code, 1, "{}\n{}", b.stdout, b.stderr);
    assert_eq!(b.verdict("cache:entry-content"), "fail", "{}", b.report);
    let declared = format!(
        "{cfg}declared:\n  - channel: cache:entry-content\n    reason: the shared Gradle cache\n"
    );
    let b = run(&["recover", "--probe-id", "bc-1"], &declared);
    assert_eq!(b.code, 0, "{}\n{}", b.stdout, b.stderr);
    assert_eq!(
        b.verdict("cache:entry-content"),
        "authorized",
        "{}",
        b.report
    );
    let c = run(
        &["cleanup", "--receipt", "runwarden-receipt-bc-1.json"],
        &cfg,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(tree(&n.data()), before);
    // By probe id, with the receipt lost: found by its agreed keys.
    let a = run(&["plant", "--probe-id", "bc-2"], &cfg);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    let c = run(&["cleanup", "--probe-id", "bc-2"], &cfg);
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(tree(&n.data()), before);
}

/// A server that takes no DELETE, or a credential that may not delete:
/// every carrier SKIPPED unless `permanent: true`, the check's own entry
/// listed as left; with it, planted, found, and kept, listed by key.
#[test]
fn where_nothing_can_be_deleted_carriers_are_planted_only_when_permanent() {
    if !nginx() {
        return;
    }
    for (delete, user) in [(false, &WRITER), (true, &NODELETE)] {
        let n = Nginx::start(delete);
        let p = on_nginx(&n, "bazel", "/", user, "", &["probe"]);
        for c in ["entry-content", "cas-blob"] {
            let f = p.finding(&format!("cache:{c}"));
            assert_eq!(f["verdict"], "skipped", "{f}");
            assert!(f["detail"].to_string().contains("permanent: true"), "{f}");
        }
        // Only the check's entry was written, and it is listed.
        assert_eq!(tree(&n.data()).len(), 1, "{:?}", tree(&n.data()));
        let left = p.report["cleanup"]["left"].as_array().unwrap();
        assert_eq!(left.len(), 1, "{}", p.report["cleanup"]);
        let p = on_nginx(&n, "bazel", "/", user, "    permanent: true\n", &["probe"]);
        assert_eq!(p.verdict("cache:entry-content"), "fail", "{}", p.report);
        assert_eq!(p.verdict("cache:cas-blob"), "fail", "{}", p.report);
        let kept = p.report["cleanup"]["kept"].as_array().unwrap();
        // Two witnesses (an action result and a blob each), the entry (the
        // same), the blob of cas-blob.
        assert_eq!(kept.len(), 7, "{}", p.report["cleanup"]);
        for k in kept {
            let e = k["entry"].as_str().unwrap();
            assert!(e.starts_with("entry ") || e.starts_with("blob "), "{e}");
        }
    }
}

fn turbo(signature: bool, read_only: bool, storage: TurboStorage) -> Turbo {
    Turbo::start(TurboOpts {
        signature,
        read_only,
        storage,
    })
}

fn on_turbo(t: &Turbo, extra: &str, args: &[&str]) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let cfg = t.config("cache", "ci") + extra;
    let p = run_config(dir.path(), &cfg, &[TOKEN_ENV], args);
    no_secrets(&p, &[TOKEN]);
    p
}

/// Turborepo's API deletes nothing: SKIPPED without `permanent: true`;
/// with it, each carrier FAILs where the server keeps tags, the tag is
/// said to carry nothing where it does not, and what was written is kept
/// and listed by key. A read-only server on the same storage refuses
/// every write (PASS, the 403 said). Foreign artifacts are untouched.
#[test]
fn turborepo_fails_where_open_and_keeps_what_it_cannot_delete() {
    let store = tempfile::tempdir().unwrap();
    let local = TurboStorage::Local(store.path().to_path_buf());
    let t = turbo(true, false, local.clone());
    std::fs::create_dir_all(store.path().join("ci")).unwrap();
    std::fs::write(store.path().join("ci/theirs"), b"their artifact").unwrap();
    std::fs::write(store.path().join("ci/theirs.tag"), b"their tag").unwrap();
    let p = on_turbo(&t, "", &["probe"]);
    // (Nothing tested at all: exit 1, saying so.)
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert!(p.stderr.contains("nothing was tested"), "{}", p.stderr);
    for (c, f) in verdicts(&p) {
        assert_eq!(f, "skipped", "{c}: {}", p.report);
    }
    assert_eq!(
        tree(store.path()).len(),
        2,
        "nothing is written without permanent"
    );
    let p = on_turbo(&t, "    permanent: true\n", &["probe"]);
    assert_eq!(
        verdicts(&p),
        vec![
            pair("entry-content", "fail"),
            pair("artifact-tag", "fail"),
            pair("cas-blob", "skipped")
        ],
        "{}",
        p.report
    );
    let kept = p.report["cleanup"]["kept"].as_array().unwrap();
    // Two witnesses and two plants, each an artifact and its tag file.
    assert_eq!(kept.len(), 4, "{}", p.report["cleanup"]);
    assert_eq!(tree(store.path()).len(), 2 + 8);
    assert_eq!(
        std::fs::read(store.path().join("ci/theirs")).unwrap(),
        b"their artifact"
    );
    assert_eq!(
        std::fs::read(store.path().join("ci/theirs.tag")).unwrap(),
        b"their tag"
    );
    // A read-only server in front of the same storage.
    let ro = turbo(true, true, local);
    let p = on_turbo(&ro, "    permanent: true\n", &["probe"]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    for c in ["entry-content", "artifact-tag"] {
        let f = p.finding(&format!("cache:{c}"));
        assert_eq!(f["verdict"], "pass", "{f}");
        assert!(f["detail"].to_string().contains("HTTP 403"), "{f}");
    }
    // A server that keeps no tags: the tag carries nothing, and says so.
    let other = tempfile::tempdir().unwrap();
    let plain = turbo(
        false,
        false,
        TurboStorage::Local(other.path().to_path_buf()),
    );
    let p = on_turbo(&plain, "    permanent: true\n", &["probe"]);
    assert_eq!(p.verdict("cache:entry-content"), "fail", "{}", p.report);
    let f = p.finding("cache:artifact-tag");
    assert_eq!(f["verdict"], "pass", "{f}");
    assert!(f["detail"].to_string().contains("no x-artifact-tag"), "{f}");
}

/// Turborepo's cache on a bucket (SeaweedFS): its artifacts are objects
/// too, and one probe of both surfaces on one store fails both.
#[test]
fn a_turborepo_cache_on_a_bucket_is_open_through_both_surfaces() {
    let s = Seaweed::start();
    let t = turbo(
        true,
        false,
        TurboStorage::S3 {
            endpoint: s.endpoint.clone(),
            bucket: seaweed::BUCKET.into(),
            access: seaweed::WRITER.access.into(),
            secret: seaweed::WRITER.secret.into(),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let bucket = s.config("bucket", "probe/");
    let cache = t.config("cache", "ci");
    let cfg = format!(
        "{bucket}{}    permanent: true\n",
        cache.split_once("surfaces:\n").unwrap().1
    );
    let mut env: Vec<(&str, &str)> = seaweed::env(&seaweed::WRITER).to_vec();
    env.push(TOKEN_ENV);
    let p = run_config(dir.path(), &cfg, &env, &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(p.verdict("cache:entry-content"), "fail", "{}", p.report);
    assert_eq!(p.verdict("cache:artifact-tag"), "fail", "{}", p.report);
    assert_eq!(p.verdict("bucket:object-content"), "fail", "{}", p.report);
    no_secrets(&p, &[TOKEN, seaweed::WRITER.secret]);
    // The artifacts are objects `ci/<hash>` of the bucket, kept.
    let keys = s.boto(
        &seaweed::WRITER,
        "print(len([o['Key'] for o in s3.list_objects_v2(Bucket=B, Prefix='ci/').get('Contents', [])]))",
    );
    assert_eq!(keys.trim(), "8", "{keys}");
}

/// An eviction between run A and run B (the oldest entries gone, the
/// plant among them), or a cache emptied: no carrier reads as closed, and
/// each says why.
#[test]
fn an_eviction_between_the_runs_is_an_error_never_a_pass() {
    if !nginx() {
        return;
    }
    let n = Nginx::start(true);
    let dir = tempfile::tempdir().unwrap();
    let cfg = n.config("cache", "bazel", "/");
    let run = |args: &[&str]| run_config(dir.path(), &cfg, &env(&WRITER), args);
    for (id, keep) in [("ev-1", true), ("ev-2", false)] {
        let a = run(&["plant", "--probe-id", id]);
        assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
        // Everything goes but (`keep`) the witness made after the plants,
        // its blob and its action result: what an eviction of the oldest
        // leaves. (Modification times are too coarse to order by.)
        for (f, _) in tree(&n.data()) {
            let f = n.data().join(f);
            let newest = memchr::memmem::find(&std::fs::read(&f).unwrap(), b"witness-by-key-after")
                .is_some();
            if !(keep && newest) {
                std::fs::remove_file(f).unwrap();
            }
        }
        let b = run(&["recover", "--probe-id", id]);
        for c in ["entry-content", "cas-blob"] {
            let f = b.finding(&format!("cache:{c}"));
            assert_eq!(f["verdict"], "error", "{id}: {f}");
            assert!(f["detail"].to_string().contains("eviction"), "{f}");
        }
        let _ = run(&["cleanup", "--probe-id", id]);
        assert!(tree(&n.data()).is_empty(), "{:?}", tree(&n.data()));
    }
}

/// A Turborepo cache the job names (`TURBO_API`) is an exposure coverage
/// lists: tested by a configured build-cache on its origin, a gap with
/// its stanza proposed without one.
#[test]
fn coverage_counts_the_build_cache_a_job_names() {
    let store = tempfile::tempdir().unwrap();
    let t = turbo(true, false, TurboStorage::Local(store.path().to_path_buf()));
    let dir = tempfile::tempdir().unwrap();
    let id = format!("build-cache:{}/", t.url);
    let named = [
        ("TURBO_API", t.url.as_str()),
        TOKEN_ENV,
        ("TURBO_TEAM", "ci"),
    ];
    let exposure = |p: &crate::common::Probe| crate::common::exposure(p, &id);
    let cfg = t.config("cache", "ci") + "    permanent: true\n";
    let p = run_config(dir.path(), &cfg, &named, &["probe"]);
    assert_eq!(exposure(&p)["status"], "tested", "{}", p.report);
    no_secrets(&p, &[TOKEN]);
    let other = tempfile::tempdir().unwrap();
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: d\n    type: filesystem\n    path: {}\n",
        serde_json::to_string(other.path()).unwrap()
    );
    let p = run_config(dir.path(), &cfg, &named, &["probe"]);
    let e = exposure(&p);
    assert_eq!(e["status"], "not-tested", "{e}");
    let stanza = e["stanza"].as_str().unwrap();
    assert!(
        stanza.contains("type: build-cache") && stanza.contains("protocol: turborepo"),
        "{e}"
    );
    no_secrets(&p, &[TOKEN]);
}

/// A loopback build cache (the control's server) with a token, and a
/// config of `protocol` on it: for the faults real servers show that
/// nginx and turborepo-remote-cache here do not (a 403 for a missing key,
/// blobs refused while action results are not).
fn loopback(
    protocol: &str,
) -> (
    runwarden::loopback::build_cache::BuildCacheServer,
    String,
    String,
) {
    let server = runwarden::loopback::build_cache::BuildCacheServer::start().unwrap();
    let token = server.token().unwrap();
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: cache\n    type: build-cache\n    protocol: {protocol}\n    url: http://127.0.0.1:{}/\n    token-env: BC_TOKEN\n",
        server.port
    );
    (server, token, cfg)
}

/// Someone overwrites the plant at its agreed key: run B finds an entry
/// that is not run A's there, which is no miss (ERROR, never PASS).
#[test]
fn a_plant_overwritten_at_its_key_is_an_error_never_a_pass() {
    if !nginx() {
        return;
    }
    let n = Nginx::start(true);
    let dir = tempfile::tempdir().unwrap();
    let cfg = n.config("cache", "gradle", "/cache/");
    let a = run_config(
        dir.path(),
        &cfg,
        &env(&WRITER),
        &["plant", "--probe-id", "ow-1"],
    );
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    for (f, _) in tree(&n.data()) {
        let f = n.data().join(f);
        if memchr::memmem::find(&std::fs::read(&f).unwrap(), b"-entry-content-").is_some() {
            std::fs::write(&f, b"someone else's entry").unwrap();
        }
    }
    let b = run_config(
        dir.path(),
        &cfg,
        &env(&WRITER),
        &["recover", "--probe-id", "ow-1"],
    );
    let f = b.finding("cache:entry-content");
    assert_eq!(f["verdict"], "error", "{f}");
    assert!(
        f["detail"].to_string().contains("not what run A wrote"),
        "{f}"
    );
}

/// A cache that answers 403 for a key nothing is at (its bucket may not
/// be listed): with the plant gone and the witnesses answered, the 403 is
/// no refusal (ERROR, never PASS).
#[test]
fn a_403_for_a_missing_key_is_never_taken_for_a_refusal() {
    let (server, token, cfg) = loopback("gradle");
    let dir = tempfile::tempdir().unwrap();
    let env = [("BC_TOKEN", token.as_str())];
    let a = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "md-1"]);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    assert_eq!(server.forget("-entry-content-"), 1);
    server.lock().missing_denied = true;
    let b = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "md-1"]);
    let f = b.finding("cache:entry-content");
    assert_eq!(f["verdict"], "error", "{f}");
    assert!(
        f["detail"].to_string().contains("not access control"),
        "{f}"
    );
    no_secrets(&b, &[&token]);
}

/// A credential that may write action results but not blobs: the plant
/// carries the nonce in the action result itself (FAIL), and only the
/// blob carrier is refused. One that may write blobs but not delete them
/// is asked about blobs too: SKIPPED unless `permanent: true`.
#[test]
fn bazel_blobs_and_action_results_are_each_asked_about() {
    let (server, token, cfg) = loopback("bazel");
    let dir = tempfile::tempdir().unwrap();
    let env = [("BC_TOKEN", token.as_str())];
    server.lock().refuse_writes_under = Some("/cas/".into());
    let p = run_config(dir.path(), &cfg, &env, &["probe"]);
    assert_eq!(p.verdict("cache:entry-content"), "fail", "{}", p.report);
    let f = p.finding("cache:cas-blob");
    assert_eq!(f["verdict"], "pass", "{f}");
    assert!(f["detail"].to_string().contains("HTTP 403"), "{f}");
    assert_eq!(server.len(), 0, "cleanup left {} entries", server.len());
    server.lock().refuse_writes_under = None;
    server.lock().refuse_deletes_under = Some("/cas/".into());
    let p = run_config(dir.path(), &cfg, &env, &["probe"]);
    for c in ["entry-content", "cas-blob"] {
        let f = p.finding(&format!("cache:{c}"));
        assert_eq!(f["verdict"], "skipped", "{f}");
    }
    // The check's own blob stays, listed.
    assert_eq!(server.len(), 1);
    assert_eq!(
        p.report["cleanup"]["left"].as_array().unwrap().len(),
        1,
        "{}",
        p.report["cleanup"]
    );
}

/// A journal naming someone else's blob that mentions the plant's name
/// (a build log that printed it) removes nothing: only a blob that is
/// exactly what a plant writes is runwarden's.
#[test]
fn a_blob_that_only_mentions_a_plant_is_never_deleted() {
    use runwarden::marker::Key;
    use runwarden::surface::{self, CleanupOutcome, RunCtx};
    let (server, token, _) = loopback("bazel");
    let ty = surface::by_name("build-cache").unwrap();
    let settings = serde_json::json!({
        "url": format!("http://127.0.0.1:{}/", server.port),
        "protocol": "bazel",
        "auth": { "bearer": token, "source": "test" },
        "team": null,
        "control": false,
    });
    let inst = ty.open(&settings).unwrap();
    let key = Key::new(Some(b"k".to_vec()));
    let ctx = RunCtx {
        probe_id: "bl-1",
        key: &key,
        surface: "cache",
    };
    let name = surface::tagged_name(&ctx, "entry-content", None, "");
    let log = format!("runwarden build-cache entry {name}\nand the rest of someone's build log\n");
    let sha = runwarden::nonce::to_hex(&Sha256::digest(log.as_bytes()));
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT"])
        .arg("-H")
        .arg(format!("authorization: Bearer {token}"))
        .arg("--data-binary")
        .arg(&log)
        .arg(format!("http://127.0.0.1:{}/cas/{sha}", server.port))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    let forged = serde_json::json!({ "name": name, "kind": "blob", "key": sha, "sha256": sha });
    let o = surface::cleanup_owned(&*inst, &ctx, &[forged]);
    assert!(!matches!(o[0], CleanupOutcome::Removed), "{o:?}");
    assert_eq!(server.len(), 1, "their blob was deleted");
}

/// A Turborepo server that keeps tags hands the witnesses' back: a plant
/// whose tag came back changed is no miss (ERROR, never PASS).
#[test]
fn a_tag_changed_while_the_witnesses_keep_theirs_is_an_error() {
    let store = tempfile::tempdir().unwrap();
    let t = turbo(true, false, TurboStorage::Local(store.path().to_path_buf()));
    let dir = tempfile::tempdir().unwrap();
    let cfg = t.config("cache", "ci") + "    permanent: true\n";
    let a = run_config(
        dir.path(),
        &cfg,
        &[TOKEN_ENV],
        &["plant", "--probe-id", "tg-1"],
    );
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    let mut changed = 0;
    for (f, _) in tree(store.path()) {
        let f = store.path().join(f);
        if f.extension().is_some_and(|e| e == "tag") {
            let art = std::fs::read(f.with_extension("")).unwrap();
            if memchr::memmem::find(&art, b"-artifact-tag-").is_some() {
                std::fs::write(&f, b"changed").unwrap();
                changed += 1;
            }
        }
    }
    assert_eq!(changed, 1, "{:?}", tree(store.path()));
    let b = run_config(
        dir.path(),
        &cfg,
        &[TOKEN_ENV],
        &["recover", "--probe-id", "tg-1"],
    );
    let f = b.finding("cache:artifact-tag");
    assert_eq!(f["verdict"], "error", "{f}");
}
