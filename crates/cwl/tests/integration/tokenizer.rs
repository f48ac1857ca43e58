//! The embedded o200k tokenizer agrees with tiktoken-rs, the reference.

use cwl::{O200k, TokenCounter};

#[test]
fn o200k_matches_tiktoken_on_varied_text() {
    let reference = tiktoken_rs::o200k_base_singleton();
    let samples = [
        "hello world",
        "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
        "src/middleware/auth.ts:47:  const claims = verifyToken(token);",
        "Ünïcödé — ελληνικά, 日本語のテキスト, emoji 🚀🔥",
        "    indented\n\n\n\ttabs\tand  double  spaces   ",
        "{\"action\":\"start\",\"name\":\"locate-auth\",\"type\":\"expl\"}",
        "a1b2c3d4e5f6 0x7fffffff 3.14159265358979 1e-9 sha256:9f86d081884c7d65",
        "",
    ];
    let counter = O200k::new();
    for sample in samples {
        assert_eq!(
            counter.count(sample),
            reference.encode_ordinary(sample).len(),
            "{sample:?}"
        );
    }
    let long: String = (0..2000)
        .map(|i| format!("line {i}: let x_{i} = compute({i});\n"))
        .collect();
    assert_eq!(counter.count(&long), reference.encode_ordinary(&long).len());
}
