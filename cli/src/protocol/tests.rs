//! Unit tests of the line reader.

use tokio::io::BufReader;

use super::{Line, read_line};

async fn lines(input: &[u8], limit: usize) -> Vec<(Line, Vec<u8>)> {
    let mut reader = BufReader::with_capacity(4, input);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        let line = read_line(&mut reader, &mut buf, limit)
            .await
            .expect("reading a slice cannot fail");
        if line == Line::Eof {
            return out;
        }
        out.push((line, buf.clone()));
    }
}

#[tokio::test]
async fn splits_lines_across_small_reads() {
    let got = lines(b"hello world\nsecond\nlast", 100).await;
    assert_eq!(
        got,
        [
            (Line::Complete, b"hello world".to_vec()),
            (Line::Complete, b"second".to_vec()),
            (Line::Complete, b"last".to_vec()),
        ]
    );
}

#[tokio::test]
async fn an_oversized_line_is_discarded_and_the_next_one_read() {
    let got = lines(b"0123456789abcdef\nok\n", 8).await;
    assert_eq!(
        got,
        [
            (Line::TooLong, Vec::new()),
            (Line::Complete, b"ok".to_vec())
        ]
    );
}
