//! `type: object-store`: an S3-compatible bucket two runs can both reach.

pub mod s3;
