//! A plain table of strings under a header, in the style of `list`, for
//! `import` and `clients`.

use comfy_table::{Attribute, Cell};

use super::list::{new_table, tighten};
use super::{Style, trim_lines};

/// `headers` over `rows`, borderless and aligned.
pub(crate) fn render_rows(headers: &[&str], rows: &[Vec<String>], style: &Style) -> String {
    let mut table = new_table(style);
    table.set_header(headers.iter().map(|h| {
        let c = Cell::new(h);
        if style.color {
            c.add_attribute(Attribute::Bold)
        } else {
            c
        }
    }));
    for r in rows {
        table.add_row(r);
    }
    tighten(&mut table);
    let mut s = trim_lines(&table.to_string());
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}
