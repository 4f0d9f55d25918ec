//! Unit tests for the shell-noise filter, table-driven and re-fed at every split.

use super::*;

const NOISE_A: &str =
    "bash: cannot set terminal process group (1234): Inappropriate ioctl for device\n";
const NOISE_B: &str = "bash: no job control in this shell\n";

fn run(chunks: &[&[u8]]) -> Vec<u8> {
    let mut filter = NoiseFilter::default();
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&filter.feed(chunk));
    }
    out.extend(filter.flush());
    out
}

fn check(input: &str, expected: &str) {
    assert_eq!(
        String::from_utf8_lossy(&run(&[input.as_bytes()])),
        expected,
        "whole: {input:?}"
    );
    let bytes = input.as_bytes();
    for split in 0..=bytes.len() {
        let (a, b) = bytes.split_at(split);
        assert_eq!(
            String::from_utf8_lossy(&run(&[a, b])),
            expected,
            "split at {split}: {input:?}"
        );
    }
}

#[test]
fn b6_leading_noise_is_stripped_at_every_split() {
    check(&format!("{NOISE_A}{NOISE_B}hi\n"), "hi\n");
    check(&format!("{NOISE_B}{NOISE_A}hi\n"), "hi\n");
    check(
        "bash: tcsetattr: Inappropriate ioctl for device\nok\n",
        "ok\n",
    );
}

#[test]
fn b6_noise_after_real_output_is_kept() {
    let input = format!("hi\n{NOISE_B}");
    check(&input, &input);
}

#[test]
fn b6_plain_output_passes_untouched() {
    check("hello world\nsecond\n", "hello world\nsecond\n");
    check("prompt> ", "prompt> ");
}

#[test]
fn b6_noise_lines_in_separate_reads() {
    let out = run(&[NOISE_A.as_bytes(), NOISE_B.as_bytes(), b"hi\n"]);
    assert_eq!(out, b"hi\n");
}
