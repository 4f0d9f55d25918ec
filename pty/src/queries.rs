//! The terminal queries: the one list of the questions a program asks its
//! terminal, for the scanner that answers some of them and for the client that
//! keeps all of them from reaching a real terminal out of turn (`herd logs`).

const ESC: u8 = 0x1b;

/// Digits a DEC private mode query may carry; longer numbers are not a query.
const MAX_MODE_DIGITS: usize = 10;

/// A terminal query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// `ESC[5n`: device status report (answered by the scanner).
    Status,
    /// `ESC[6n`: cursor position report (answered by the scanner).
    Cursor,
    /// `ESC[18t`: text area size in characters (answered by the scanner).
    Size,
    /// `ESC[?{n}$p`: DEC private mode request, 1 to 10 digits (answered by the
    /// scanner).
    Mode,
    /// `ESC[?6n`, `ESC[14t`, `ESC[c`, `ESC[0c`, `ESC[>c`, `ESC[>0c`: extended
    /// cursor position, text area size in pixels, device attributes; left to a
    /// real terminal (not answered by the scanner).
    Other,
}

impl Query {
    /// Whether the scanner answers this query.
    pub fn answered(self) -> bool {
        !matches!(self, Query::Other)
    }
}

/// The queries of a fixed spelling.
const LITERALS: [(&[u8], Query); 9] = [
    (b"\x1b[5n", Query::Status),
    (b"\x1b[6n", Query::Cursor),
    (b"\x1b[18t", Query::Size),
    (b"\x1b[?6n", Query::Other),
    (b"\x1b[14t", Query::Other),
    (b"\x1b[c", Query::Other),
    (b"\x1b[0c", Query::Other),
    (b"\x1b[>c", Query::Other),
    (b"\x1b[>0c", Query::Other),
];

/// What bytes are against the terminal queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMatch {
    /// The bytes start with this query, `len` bytes long.
    Query(Query, usize),
    /// All the bytes are a proper prefix of some query: more may make one.
    Prefix,
    /// The bytes do not start with a query and cannot become one.
    NoMatch,
}

/// Matches the start of `bytes` against the terminal queries; with
/// `answered_only`, against the ones the scanner answers ([`Query::answered`]).
pub fn match_query(bytes: &[u8], answered_only: bool) -> QueryMatch {
    let mut prefix = false;
    for (query, kind) in LITERALS {
        if answered_only && !kind.answered() {
            continue;
        }
        if bytes.starts_with(query) {
            return QueryMatch::Query(kind, query.len());
        }
        prefix |= query.starts_with(bytes);
    }
    match match_mode(bytes) {
        QueryMatch::NoMatch if prefix => QueryMatch::Prefix,
        found => found,
    }
}

/// Matches `bytes` against a DEC private mode request, `ESC[?<1 to 10 digits>$p`.
fn match_mode(bytes: &[u8]) -> QueryMatch {
    const HEAD: &[u8] = b"\x1b[?";
    let Some(rest) = bytes.strip_prefix(HEAD) else {
        return if HEAD.starts_with(bytes) {
            QueryMatch::Prefix
        } else {
            QueryMatch::NoMatch
        };
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > MAX_MODE_DIGITS {
        return QueryMatch::NoMatch;
    }
    match &rest[digits..] {
        [] => QueryMatch::Prefix,
        [b'$'] if digits > 0 => QueryMatch::Prefix,
        [b'$', b'p', ..] if digits > 0 => QueryMatch::Query(Query::Mode, HEAD.len() + digits + 2),
        _ => QueryMatch::NoMatch,
    }
}

/// Whether `bytes` ends with the start of a possible terminal query (ESC and
/// what follows it, at most [`crate::MAX_PENDING`] bytes): where that start
/// begins, so a caller cutting a stream into chunks can hold it for the next.
pub fn unfinished_query_at(bytes: &[u8]) -> Option<usize> {
    let from = bytes.len().saturating_sub(crate::MAX_PENDING);
    let at = from + memchr::memrchr(ESC, &bytes[from..])?;
    (match_query(&bytes[at..], false) == QueryMatch::Prefix).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::{Query, QueryMatch, match_query, unfinished_query_at};

    #[test]
    fn b7_the_queries_and_their_prefixes_are_matched() {
        let all = [
            "\x1b[5n",
            "\x1b[6n",
            "\x1b[18t",
            "\x1b[?2004$p",
            "\x1b[?6n",
            "\x1b[14t",
            "\x1b[c",
            "\x1b[0c",
            "\x1b[>c",
            "\x1b[>0c",
        ];
        for query in all {
            let bytes = query.as_bytes();
            let QueryMatch::Query(_, len) = match_query(&[bytes, b"rest"].concat(), false) else {
                panic!("{query:?} is a query");
            };
            assert_eq!(len, bytes.len(), "{query:?}");
            for cut in 1..bytes.len() {
                assert_eq!(
                    match_query(&bytes[..cut], false),
                    QueryMatch::Prefix,
                    "{query:?} cut at {cut}"
                );
                assert_eq!(unfinished_query_at(&bytes[..cut]), Some(0), "{query:?}");
            }
        }
        assert_eq!(match_query(b"\x1b[c", true), QueryMatch::NoMatch);
        assert_eq!(
            match_query(b"\x1b[6n", true),
            QueryMatch::Query(Query::Cursor, 4)
        );
        for not in [
            "\x1b[1m",
            "\x1b[?25h",
            "\x1b[?$p",
            "\x1b[?12345678901$p",
            "a",
        ] {
            assert_eq!(
                match_query(not.as_bytes(), false),
                QueryMatch::NoMatch,
                "{not:?}"
            );
        }
        assert_eq!(unfinished_query_at(b"ab\x1b[1m"), None);
        assert_eq!(unfinished_query_at(b"ab\x1b[?12"), Some(2));
    }
}
