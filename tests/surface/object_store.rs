//! The object-store surface against SeaweedFS, a real S3-compatible store
//! (tests/common/seaweed.rs), with boto3, a real client, on the same
//! server: an open bucket fails every carrier, and what runwarden wrote
//! boto3 reads back; a read-only identity passes with the refusal said;
//! one that may not list is tested where it can be and says where not;
//! plant and recover across jobs; a declared channel is authorized;
//! foreign objects, uploads, metadata and tags are byte-identical
//! afterwards; cleanup by probe id; no credential in any output.

use crate::common::seaweed::{BLIND, Keys, READER, Seaweed, WRITER, env};
use crate::common::{no_secrets, run_config};

const CARRIERS: [&str; 5] = [
    "object-key",
    "object-content",
    "object-metadata",
    "object-tag",
    "multipart-upload",
];

/// Everything in the bucket, as boto3 reads it: each object's key,
/// content digest, user metadata and tags, and each upload's key. (One
/// JSON line: compared whole before and after.)
fn everything(s: &Seaweed) -> String {
    s.boto(
        &WRITER,
        "import hashlib\nout = []\n\
         for page in s3.get_paginator('list_objects_v2').paginate(Bucket=B):\n\
         \x20 for o in page.get('Contents', []):\n\
         \x20   k = o['Key']; g = s3.get_object(Bucket=B, Key=k)\n\
         \x20   t = s3.get_object_tagging(Bucket=B, Key=k)['TagSet']\n\
         \x20   out.append([k, hashlib.sha256(g['Body'].read()).hexdigest(), g.get('Metadata'), t])\n\
         ups = [u['Key'] for u in s3.list_multipart_uploads(Bucket=B).get('Uploads', [])]\n\
         print(json.dumps([out, sorted(ups)]))",
    )
}

/// Foreign state a probe must leave as it is: 1,005 objects under the
/// prefix (a listing of more than one page), one with metadata and tags,
/// and an upload never completed.
fn foreign(s: &Seaweed, prefix: &str) {
    let out = s.boto(
        &WRITER,
        &format!(
            "for i in range(1005):\n\
             \x20 s3.put_object(Bucket=B, Key='{prefix}foreign/%04d' % i, Body=b'x%d' % i)\n\
             s3.put_object(Bucket=B, Key='{prefix}foreign-meta', Body=b'm', Metadata={{'runwarden': 'theirs'}}, Tagging='runwarden=theirs')\n\
             s3.create_multipart_upload(Bucket=B, Key='{prefix}foreign-upload')\n\
             print('ok')"
        ),
    );
    assert_eq!(out.trim(), "ok", "{out}");
}

fn verdicts(p: &crate::common::Probe) -> Vec<(String, String)> {
    CARRIERS
        .iter()
        .map(|c| (c.to_string(), p.verdict(&format!("bucket:{c}"))))
        .collect()
}

fn all(v: &str) -> Vec<(String, String)> {
    CARRIERS
        .iter()
        .map(|c| (c.to_string(), v.to_string()))
        .collect()
}

fn probe(s: &Seaweed, keys: &Keys, extra: &str, args: &[&str]) -> crate::common::Probe {
    let dir = tempfile::tempdir().unwrap();
    let cfg = s.config("bucket", "team/") + extra;
    run_config(dir.path(), &cfg, &env(keys), args)
}

#[test]
fn an_open_bucket_fails_every_carrier_and_leaves_what_is_foreign() {
    let s = Seaweed::start();
    foreign(&s, "team/");
    let before = everything(&s);
    let p = probe(&s, &WRITER, "", &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), all("fail"), "{}", p.report);
    // The listing went past its first page (1,005 foreign keys).
    let detail = p.finding("bucket:object-key")["detail"].to_string();
    assert!(detail.contains("carries the nonce"), "{detail}");
    assert_eq!(everything(&s), before, "the bucket changed");
    no_secrets(&p, &[WRITER.secret]);
}

#[test]
fn what_runwarden_writes_boto3_reads_and_cleanup_takes_it_back() {
    let s = Seaweed::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = s.config("bucket", "team/");
    let a = run_config(
        dir.path(),
        &cfg,
        &env(&WRITER),
        &["plant", "--probe-id", "os-1"],
    );
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    // boto3 sees each plant: a key, the metadata and the tag, an upload.
    let seen = s.boto(
        &WRITER,
        "keys = [o['Key'] for o in s3.list_objects_v2(Bucket=B, Prefix='team/runwarden-os-1-').get('Contents', [])]\n\
         meta = [k for k in keys if 'object-metadata' in k]\n\
         tag = [k for k in keys if 'object-tag' in k]\n\
         m = s3.head_object(Bucket=B, Key=meta[0])['Metadata']['runwarden']\n\
         t = s3.get_object_tagging(Bucket=B, Key=tag[0])['TagSet'][0]\n\
         ups = [u['Key'] for u in s3.list_multipart_uploads(Bucket=B, Prefix='team/').get('Uploads', [])]\n\
         print(len(keys), len(m), t['Key'], len(t['Value']), len([u for u in ups if 'multipart-upload' in u]))",
    );
    // 4 plants and 2 witnesses; a 32-hex nonce in the metadata and tag.
    assert_eq!(seen.trim(), "6 32 runwarden 32 1", "{seen}");
    // A later job recovers it, another cleans it by probe id.
    let b = run_config(
        dir.path(),
        &cfg,
        &env(&WRITER),
        &["recover", "--probe-id", "os-1"],
    );
    assert_eq!(b.code, 1, "{}\n{}", b.stdout, b.stderr);
    assert_eq!(verdicts(&b), all("fail"), "{}", b.report);
    // Cleanup by the plant's receipt.
    let c = run_config(
        dir.path(),
        &cfg,
        &env(&WRITER),
        &["cleanup", "--receipt", "runwarden-receipt-os-1.json"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    let left = s.boto(
        &WRITER,
        "print(len(s3.list_objects_v2(Bucket=B).get('Contents', [])), len(s3.list_multipart_uploads(Bucket=B).get('Uploads', [])))",
    );
    assert_eq!(left.trim(), "0 0", "{left}\n{}", c.stdout);
    for p in [&a, &b, &c] {
        no_secrets(p, &[WRITER.secret]);
    }
}

#[test]
fn a_read_only_identity_passes_every_carrier_with_the_refusal_said() {
    let s = Seaweed::start();
    let p = probe(&s, &READER, "", &["probe"]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), all("pass"), "{}", p.report);
    for c in CARRIERS {
        let d = p.finding(&format!("bucket:{c}"))["detail"].to_string();
        assert!(d.contains("AccessDenied"), "{c}: {d}");
    }
    no_secrets(&p, &[READER.secret]);
    // Across jobs too: the plant's refusals travel in its receipt.
    let dir = tempfile::tempdir().unwrap();
    let cfg = s.config("bucket", "team/");
    let a = run_config(
        dir.path(),
        &cfg,
        &env(&READER),
        &["plant", "--probe-id", "ro-1"],
    );
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    let b = run_config(
        dir.path(),
        &cfg,
        &env(&READER),
        &["recover", "--probe-id", "ro-1"],
    );
    assert_eq!(b.code, 0, "{}\n{}", b.stdout, b.stderr);
    assert_eq!(verdicts(&b), all("pass"), "{}", b.report);
}

/// A bucket policy that refuses listing but allows writes and reads by
/// key: the agreed keys are open, the keyed object is refused to run B's
/// listing and said so.
#[test]
fn an_identity_that_may_not_list_is_tested_where_it_can_be() {
    let s = Seaweed::start();
    let p = probe(&s, &BLIND, "", &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    for c in ["object-content", "object-metadata", "object-tag"] {
        assert_eq!(
            p.verdict(&format!("bucket:{c}")),
            "fail",
            "{c}: {}",
            p.report
        );
    }
    assert_eq!(p.verdict("bucket:object-key"), "pass", "{}", p.report);
    let d = p.finding("bucket:object-key")["detail"].to_string();
    assert!(
        d.contains("ListObjectsV2") && d.contains("AccessDenied"),
        "{d}"
    );
    // Nothing left (its versioning says the bucket never kept versions,
    // which it may read though it may not list them).
    assert_eq!(
        p.report["cleanup"]["left"],
        serde_json::json!([]),
        "{}",
        p.report["cleanup"]
    );
    // Its plants are gone all the same (cleanup reads by key).
    let left = s.boto(
        &WRITER,
        "print(len(s3.list_objects_v2(Bucket=B).get('Contents', [])), len(s3.list_multipart_uploads(Bucket=B).get('Uploads', [])))",
    );
    assert_eq!(left.trim(), "0 0", "{left}");
}

#[test]
fn a_declared_channel_is_authorized() {
    let s = Seaweed::start();
    let p = probe(
        &s,
        &WRITER,
        "declared:\n  - channel: bucket:object-content\n    reason: the build cache's shared slot\n",
        &["probe"],
    );
    assert_eq!(
        p.verdict("bucket:object-content"),
        "authorized",
        "{}",
        p.report
    );
    assert_eq!(p.verdict("bucket:object-key"), "fail", "{}", p.report);
}

/// A bucket the job's environment names for a build cache (sccache's) is
/// an exposure coverage lists: tested by a configured object-store of the
/// same bucket, a gap without one.
#[test]
fn coverage_counts_the_bucket_a_build_cache_names() {
    let s = Seaweed::start();
    let dir = tempfile::tempdir().unwrap();
    let id = format!("bucket:{}/{}", s.endpoint, crate::common::seaweed::BUCKET);
    let named = [
        ("SCCACHE_BUCKET", crate::common::seaweed::BUCKET),
        ("SCCACHE_ENDPOINT", s.endpoint.as_str()),
    ];
    let exposure = |p: &crate::common::Probe| crate::common::exposure(p, &id);
    let mut envs: Vec<(&str, &str)> = env(&WRITER).to_vec();
    envs.extend(named);
    let p = run_config(dir.path(), &s.config("bucket", "team/"), &envs, &["probe"]);
    assert_eq!(exposure(&p)["status"], "tested", "{}", p.report);
    // Another surface only: the bucket is a gap, its stanza proposed.
    let other = tempfile::tempdir().unwrap();
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: d\n    type: filesystem\n    path: {}\n",
        serde_json::to_string(other.path()).unwrap()
    );
    let p = run_config(dir.path(), &cfg, &named, &["probe"]);
    let e = exposure(&p);
    assert_eq!(e["status"], "not-tested", "{e}");
    assert!(
        e["stanza"].as_str().unwrap().contains("type: object-store"),
        "{e}"
    );
}

/// AWS answers AccessDenied, not 404, to a read of a key that does not
/// exist when the identity may not list (the loopback bucket in that
/// mode; SeaweedFS answers 404). A plant that is not there must not read
/// as refused: with the witnesses there too, the reads by key are misses
/// shown current; with the witnesses gone as well (nothing planted), no
/// PASS at all (0.12's first cut took every such 403 for a refusal).
#[test]
fn access_denied_to_a_missing_key_is_never_taken_for_a_refusal() {
    use runwarden::loopback::s3::S3Server;
    let server = S3Server::start("aws-like", false).unwrap();
    server.lock().missing_denied = true;
    let key = server.access_key();
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: bucket\n    type: object-store\n    url: {}\n    bucket: aws-like\n    access-key-env: S3_AK\n    secret-key-env: S3_SK\n    consistency-wait: 0\n",
        server.endpoint()
    );
    let env = [("S3_AK", key.as_str()), ("S3_SK", "any-secret")];
    // Planted, then everything gone (a lifecycle rule): every read by key
    // is a 403, the witnesses' too, and the listing shows none of them.
    let a = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "aws-1"]);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    server.lock().objects.clear();
    let b = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "aws-1"]);
    for c in ["object-content", "object-metadata", "object-tag"] {
        let v = b.verdict(&format!("bucket:{c}"));
        assert_eq!(v, "error", "{c}: {}", b.report);
    }
    // Planted, then the plants alone gone (a lifecycle rule): the reads
    // are misses the witnesses show current.
    let a = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "aws-2"]);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    server.lock().objects.retain(|k, _| k.contains("-witness-"));
    let b = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "aws-2"]);
    for c in ["object-content", "object-metadata", "object-tag"] {
        let f = b.finding(&format!("bucket:{c}"));
        assert_eq!(f["verdict"], "pass", "{c}: {}", b.report);
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("a key that does not exist"),
            "{f}"
        );
    }
}

/// Everything a bucket that keeps versions holds, as boto3 lists it:
/// each version's and delete marker's key and id.
fn versions(s: &Seaweed) -> String {
    s.boto(
        &WRITER,
        "v = s3.list_object_versions(Bucket=B)\n\
         print(json.dumps(sorted([[x['Key'], x['VersionId']] for x in v.get('Versions', []) + v.get('DeleteMarkers', [])])))",
    )
}

/// In a bucket that keeps versions, an object written and deleted at once
/// leaves a version and a delete marker no object listing shows: run B
/// finds the nonce among the versions, and cleanup deletes both by id,
/// leaving the foreign versions as they were. Without versions the
/// carrier is SKIPPED: a deleted object leaves nothing.
#[test]
fn a_versioned_bucket_carries_a_deleted_objects_versions() {
    let s = Seaweed::start();
    let on = s.boto(
        &WRITER,
        "s3.put_bucket_versioning(Bucket=B, VersioningConfiguration={'Status': 'Enabled'})\n\
         s3.put_object(Bucket=B, Key='team/foreign-v', Body=b'one')\n\
         s3.delete_object(Bucket=B, Key='team/foreign-v')\n\
         print('ok')",
    );
    assert_eq!(on.trim(), "ok", "{on}");
    let before = versions(&s);
    let p = probe(&s, &WRITER, "", &["probe"]);
    assert_eq!(p.verdict("bucket:object-version"), "fail", "{}", p.report);
    assert_eq!(verdicts(&p), all("fail"), "{}", p.report);
    assert_eq!(versions(&s), before, "{}", p.stdout);
    // Unversioned: SKIPPED, saying why, and nothing left.
    let t = Seaweed::start();
    let p = probe(&t, &WRITER, "", &["probe"]);
    let f = p.finding("bucket:object-version");
    assert_eq!(f["verdict"], "skipped", "{f}");
    assert!(
        f["detail"].as_str().unwrap().contains("keeps no versions"),
        "{f}"
    );
    assert_eq!(versions(&t).trim(), "[]");
}

/// An identity that may write but not delete versions (the loopback
/// bucket refusing deletes by version id, which SeaweedFS cannot be told
/// to): every object written would stay. Without `permanent: true`, every
/// carrier that writes an object is SKIPPED saying why, no nonce is
/// written, and the one version the check made is listed as left (the
/// upload, which leaves no version, is planted and cleaned up); with it,
/// they FAIL and their versions are listed as kept.
#[test]
fn versions_the_identity_may_not_delete_are_planted_only_when_permanent() {
    use runwarden::loopback::s3::S3Server;
    let server = S3Server::start_with("versioned", false, true).unwrap();
    server.lock().versions_undeletable = true;
    let key = server.access_key();
    let dir = tempfile::tempdir().unwrap();
    let cfg = |extra: &str| {
        format!(
            "version: 1\nsurfaces:\n  - name: bucket\n    type: object-store\n    url: {}\n    bucket: versioned\n    access-key-env: S3_AK\n    secret-key-env: S3_SK\n{extra}",
            server.endpoint()
        )
    };
    let env = [("S3_AK", key.as_str()), ("S3_SK", "any-secret")];
    let p = run_config(dir.path(), &cfg(""), &env, &["probe"]);
    for c in [
        "object-key",
        "object-content",
        "object-metadata",
        "object-tag",
        "object-version",
    ] {
        let f = p.finding(&format!("bucket:{c}"));
        assert_eq!(f["verdict"], "skipped", "{f}");
        assert!(
            f["detail"].as_str().unwrap().contains("permanent: true"),
            "{f}"
        );
    }
    assert_eq!(p.verdict("bucket:multipart-upload"), "fail", "{}", p.report);
    let versions = server.lock().versions.clone();
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert!(versions[0].key.contains("version-check"), "{versions:?}");
    let left = p.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{}", p.report["cleanup"]);
    assert!(server.lock().uploads.is_empty());
    // With permanent: true, planted, found, and kept.
    let p = run_config(dir.path(), &cfg("    permanent: true\n"), &env, &["probe"]);
    assert_eq!(p.verdict("bucket:object-version"), "fail", "{}", p.report);
    assert_eq!(p.verdict("bucket:object-content"), "fail", "{}", p.report);
    let kept = p.report["cleanup"]["kept"].as_array().unwrap();
    for c in ["object-version", "object-content"] {
        assert!(
            kept.iter()
                .any(|k| k["entry"].as_str().unwrap().contains(c)),
            "{c}: {}",
            p.report["cleanup"]
        );
    }
}

/// Watch mode on a real bucket: an agent script that writes a cache key
/// through boto3 is seen using object-key; what objects hold is not read
/// there (SKIPPED, saying why).
#[test]
fn watch_sees_a_command_write_a_key() {
    let s = Seaweed::start();
    let dir = tempfile::tempdir().unwrap();
    let python = crate::common::registries::servers().join("seaweedfs/bin/python");
    let script = format!(
        "import boto3; boto3.client('s3', endpoint_url='{}', region_name='us-east-1', aws_access_key_id='{}', aws_secret_access_key='{}').put_object(Bucket='{}', Key='team/agent-note', Body=b'remember')",
        s.endpoint,
        WRITER.access,
        WRITER.secret,
        crate::common::seaweed::BUCKET
    );
    let python = python.to_string_lossy().into_owned();
    let w = run_config(
        dir.path(),
        &s.config("bucket", "team/"),
        &env(&WRITER),
        &["watch", "--report", "w.json", "--", &python, "-c", &script],
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("w.json")).unwrap()).unwrap();
    let verdict = |c: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["channel"] == format!("bucket:{c}"))
            .map(|f| f["verdict"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(verdict("object-key"), "fail", "{}\n{}", w.stdout, w.stderr);
    assert_eq!(verdict("multipart-upload"), "pass", "{report}");
    assert_eq!(verdict("object-content"), "skipped", "{report}");
}

/// A listing refused on a later page, after earlier pages were handed
/// over, is a listing that broke (ERROR), never a refusal (PASS): the
/// identity was let in, and what it read is no whole listing.
#[test]
fn a_listing_refused_partway_is_an_error_not_a_refusal() {
    use runwarden::loopback::s3::S3Server;
    let server = S3Server::start("paged", false).unwrap();
    {
        let mut st = server.lock();
        st.page = 1;
        st.deny_later_pages = true;
    }
    let key = server.access_key();
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: bucket\n    type: object-store\n    url: {}\n    bucket: paged\n    access-key-env: S3_AK\n    secret-key-env: S3_SK\n    consistency-wait: 0\n",
        server.endpoint()
    );
    let env = [("S3_AK", key.as_str()), ("S3_SK", "any-secret")];
    let p = run_config(dir.path(), &cfg, &env, &["probe"]);
    let f = p.finding("bucket:object-key");
    assert_eq!(f["verdict"], "error", "{f}");
    assert!(f["detail"].as_str().unwrap().contains("later page"), "{f}");
}
