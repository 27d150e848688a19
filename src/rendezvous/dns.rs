//! Just enough DNS (RFC 1035) for nonce deliveries: a query's one
//! question, read without following compression (a question never needs
//! it); an answer that is the query's header and question with a code and
//! no records, never larger than the query; and a query to send.

/// The response code used: every name in the zone "exists" with no
/// records (NODATA), so that a resolver minimising its questions (RFC
/// 7816) goes on to ask the full name, which an NXDOMAIN higher up would
/// stop (RFC 8020).
pub const NOERROR: u8 = 0;

/// A query's one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Lowercase, dot-separated, no trailing dot.
    pub name: String,
    /// Where the question section ends in the packet.
    pub end: usize,
}

/// The question of a standard query (QR 0, opcode 0, one question);
/// `None` for anything else.
pub fn parse_query(p: &[u8]) -> Option<Question> {
    if p.len() < 12 {
        return None;
    }
    let flags = u16::from_be_bytes([p[2], p[3]]);
    let qdcount = u16::from_be_bytes([p[4], p[5]]);
    if flags & 0x8000 != 0 || (flags >> 11) & 0xf != 0 || qdcount != 1 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    let mut total = 0;
    loop {
        let len = *p.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        // A compression pointer or a reserved label type.
        if len > 63 {
            return None;
        }
        total += len + 1;
        if total > 255 {
            return None;
        }
        let label = p.get(at..at + len)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    // QTYPE and QCLASS.
    p.get(at..at + 4)?;
    Some(Question {
        name: labels.join("."),
        end: at + 4,
    })
}

/// Whether `name` is `zone` or under it.
pub fn in_zone(name: &str, zone: &str) -> bool {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    name == zone || name.ends_with(&format!(".{zone}"))
}

/// A delivery: `<nonce>.q.<zone>` (through a resolver) or
/// `<nonce>.d.<zone>` (straight to the rendezvous).
pub fn delivery(name: &str, zone: &str) -> Option<([u8; 16], &'static str)> {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    let rest = name.strip_suffix(&format!(".{zone}"))?;
    let (nonce, tag) = rest.split_once('.')?;
    let carrier = match tag {
        "q" => "dns-query",
        "d" => "dns-direct",
        _ => return None,
    };
    Some((super::parse_nonce(nonce)?, carrier))
}

/// The answer to `query`: its id, the question, `rcode`, no records. The
/// query's other sections (an EDNS record) are left out, so the answer is
/// never larger than the query.
pub fn answer(query: &[u8], q: &Question, rcode: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.end);
    out.extend_from_slice(&query[..2]);
    // QR, AA, RD copied from the query, the code.
    let rd = query[2] & 0x01;
    out.push(0x84 | rd);
    out.push(rcode & 0x0f);
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&query[12..q.end]);
    out
}

/// A recursive query (RD) for `name`, type A, class IN.
pub fn query(id: u16, name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 18);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.extend_from_slice(&[0, 0, 1, 0, 1]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_round_trips_and_the_answer_is_never_larger() {
        let nonce = "00112233445566778899aabbccddeeff";
        let mut q = query(7, &format!("{nonce}.d.RV.example.org"));
        // An EDNS OPT record the answer leaves out.
        q[11] = 1;
        q.extend_from_slice(&[0, 0, 41, 16, 0, 0, 0, 0, 0, 0, 0]);
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.name, format!("{nonce}.d.rv.example.org"));
        let (n, c) = delivery(&parsed.name, "rv.example.org").unwrap();
        assert_eq!((n[0], c), (0x00, "dns-direct"));
        let a = answer(&q, &parsed, NOERROR);
        assert!(a.len() < q.len());
        assert_eq!(&a[..2], &[0, 7]);
        assert_eq!(a[3] & 0x0f, NOERROR);
        // Not a delivery, not a query, a compression pointer: nothing.
        assert!(delivery("x.d.rv.example.org", "rv.example.org").is_none());
        let mut resp = q.clone();
        resp[2] |= 0x80;
        assert!(parse_query(&resp).is_none());
        let mut ptr = query(1, "a.b");
        ptr[12] = 0xc0;
        assert!(parse_query(&ptr).is_none());
    }
}
