//! Bytes shown legibly: printable ASCII as itself, newline as `⏎` (or `\n`
//! where the font lacks it), tab as `\t`, anything else as `\xNN`.

/// How a byte is written; `newline` is the glyph chosen for `\n`.
pub fn byte(b: u8, newline: &str) -> String {
    match b {
        b'\n' => newline.to_string(),
        b'\t' => "\\t".to_string(),
        b'\r' => "\\r".to_string(),
        0x20..=0x7e => (b as char).to_string(),
        _ => format!("\\x{b:02x}"),
    }
}

/// A byte in quotes, for lists (`' '` stays visible).
pub fn quoted(b: u8, newline: &str) -> String {
    format!("'{}'", byte(b, newline))
}

/// `⏎` when the monospace font has it, else `\n`.
pub fn newline_glyph(ctx: &egui::Context) -> &'static str {
    let has = ctx.fonts_mut(|f| f.has_glyph(&egui::FontId::monospace(13.0), '⏎'));
    if has { "⏎" } else { "\\n" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legible_bytes() {
        assert_eq!(byte(b'a', "⏎"), "a");
        assert_eq!(byte(b'\n', "⏎"), "⏎");
        assert_eq!(byte(0, "⏎"), "\\x00");
        assert_eq!(byte(0xff, "⏎"), "\\xff");
        assert_eq!(quoted(b' ', "⏎"), "' '");
    }
}
