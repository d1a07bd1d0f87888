//! Cell styles: font (bold, italic, underline, strike, size, colour), fill, horizontal and vertical
//! alignment, wrap and borders; and the patch a `style` entry applies to cells.
//!
//! A [`Style`] is held behind an `Arc` in a cell, so the cells that share one (a header row, a
//! table's body) share its memory. Its JSON form is the API's (`{"bold": true, "fill": "#ffff00",
//! "border": {"bottom": {"style": "thin"}}}`, fields left out when unset); its binary form is a
//! mask of the fields present and then their values ([`Style::write`]). Snapshot chunks keep a
//! table of the styles they use and refer to it per cell (`codec::write_cell_styled`).
//!
//! A [`StylePatch`] sets some fields and clears others, leaving the rest as they were: a toolbar's
//! Bold changes nothing but bold, so a style change never races a value edit or another style
//! change of other fields. It may also set or clear the cell's number format.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::bytes::{CodecError, Reader, Writer};

/// A cell's style as cells hold it: shared, `None` for a plain cell.
pub type SharedStyle = Option<Arc<Style>>;

/// What a cell looks like: its number format and its style.
pub type Look = (Option<Box<str>>, SharedStyle);

/// A colour, `0xRRGGBB`; `"#rrggbb"` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rgb(pub u32);

impl Rgb {
    /// `#rrggbb` (either case; `#` required).
    pub fn parse(s: &str) -> Option<Rgb> {
        let hex = s.strip_prefix('#')?;
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(hex, 16).ok().map(Rgb)
    }

    pub fn hex(self) -> String {
        format!("#{:06x}", self.0)
    }
}

impl Serialize for Rgb {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for Rgb {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Rgb::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("{s:?} is not a colour (expected \"#rrggbb\")"))
        })
    }
}

/// A font size in points, 1 to 409 in steps of 0.5 (Excel's); held as half-points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FontSize(pub u16);

impl FontSize {
    pub const MIN_HALF_POINTS: u16 = 2;
    pub const MAX_HALF_POINTS: u16 = 818;

    pub fn points(self) -> f64 {
        f64::from(self.0) / 2.0
    }

    /// The size nearest `points` on the half-point grid, when it is within Excel's range.
    pub fn from_points(points: f64) -> Option<FontSize> {
        let half = (points * 2.0).round();
        (half >= f64::from(Self::MIN_HALF_POINTS) && half <= f64::from(Self::MAX_HALF_POINTS))
            .then_some(FontSize(half as u16))
    }
}

impl Serialize for FontSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_multiple_of(2) {
            s.serialize_u16(self.0 / 2)
        } else {
            s.serialize_f64(self.points())
        }
    }
}

impl<'de> Deserialize<'de> for FontSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let p = f64::deserialize(d)?;
        match FontSize::from_points(p) {
            Some(f) if f.points() == p => Ok(f),
            _ => Err(serde::de::Error::custom(format!(
                "font size {p} is not one of 1 to 409 points in steps of 0.5"
            ))),
        }
    }
}

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            fn code(self) -> u8 {
                match self { $($name::$variant => $code),+ }
            }

            fn from_code(c: u8) -> Result<$name, CodecError> {
                match c {
                    $($code => Ok($name::$variant),)+
                    _ => Err(CodecError::Invalid(format!(
                        concat!("unknown ", stringify!($name), " code {}"), c
                    ))),
                }
            }
        }
    };
}

code_enum!(
    /// Where a cell's content sits across it.
    HAlign { Left = 1, Center = 2, Right = 3 }
);
code_enum!(
    /// Where a cell's content sits up and down.
    VAlign { Top = 1, Middle = 2, Bottom = 3 }
);
code_enum!(
    /// A border line (Excel's common ones).
    BorderStyle { Thin = 1, Medium = 2, Thick = 3, Dashed = 4, Dotted = 5, Double = 6 }
);

/// One side's border: its line and colour (the reader's default, black, when unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Border {
    pub style: BorderStyle,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<Rgb>,
}

/// The four sides of a cell, in the order the binary form keeps them.
pub const SIDES: [&str; 4] = ["top", "right", "bottom", "left"];

/// A cell's borders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Borders {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<Border>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<Border>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottom: Option<Border>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<Border>,
}

impl Borders {
    pub fn is_empty(&self) -> bool {
        *self == Borders::default()
    }

    pub fn sides(&self) -> [Option<Border>; 4] {
        [self.top, self.right, self.bottom, self.left]
    }

    fn side_mut(&mut self, i: usize) -> &mut Option<Border> {
        match i {
            0 => &mut self.top,
            1 => &mut self.right,
            2 => &mut self.bottom,
            _ => &mut self.left,
        }
    }
}

/// How a cell looks, apart from its number format (which stays the cell's `format`). The
/// default is a plain cell; a cell whose style would be the default holds none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Style {
    #[serde(default, skip_serializing_if = "is_false")]
    pub bold: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub italic: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub underline: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub strike: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub wrap: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub font_size: Option<FontSize>,
    /// The text's colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<Rgb>,
    /// The background.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Rgb>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h_align: Option<HAlign>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_align: Option<VAlign>,
    #[serde(default, skip_serializing_if = "Borders::is_empty")]
    pub border: Borders,
}

fn is_false(b: &bool) -> bool {
    !*b
}

// Bits of the binary form's mask, shared by styles and patches.
const BOLD: u64 = 1;
const ITALIC: u64 = 1 << 1;
const UNDERLINE: u64 = 1 << 2;
const STRIKE: u64 = 1 << 3;
const WRAP: u64 = 1 << 4;
const FONT_SIZE: u64 = 1 << 5;
const COLOR: u64 = 1 << 6;
const FILL: u64 = 1 << 7;
const H_ALIGN: u64 = 1 << 8;
const V_ALIGN: u64 = 1 << 9;
/// Bits 10 to 13: the borders, in [`SIDES`] order.
const BORDER_TOP: u64 = 1 << 10;
const STYLE_BITS: u64 = (1 << 14) - 1;
/// Patches only: the number format.
const FORMAT: u64 = 1 << 14;
const FLAGS: [u64; 5] = [BOLD, ITALIC, UNDERLINE, STRIKE, WRAP];
/// A border's colour follows its line code.
const BORDER_COLOR: u8 = 0x80;

impl Style {
    pub fn is_default(&self) -> bool {
        *self == Style::default()
    }

    /// At least the bytes of its JSON form as a cell's `"style"` (for read budgets).
    pub fn json_bytes_bound(&self) -> usize {
        let flags = self.flags().iter().filter(|f| **f).count();
        let set = |b: bool| usize::from(b);
        12 + 16 * flags
            + 16 * set(self.font_size.is_some())
            + 20 * (set(self.color.is_some()) + set(self.fill.is_some()))
            + 20 * (set(self.h_align.is_some()) + set(self.v_align.is_some()))
            + 52 * self.border.sides().iter().flatten().count()
    }

    fn flags_mut(&mut self) -> [&mut bool; 5] {
        [
            &mut self.bold,
            &mut self.italic,
            &mut self.underline,
            &mut self.strike,
            &mut self.wrap,
        ]
    }

    fn flags(&self) -> [bool; 5] {
        [
            self.bold,
            self.italic,
            self.underline,
            self.strike,
            self.wrap,
        ]
    }

    /// The binary form: a varint mask of the fields present, then their values in bit order
    /// (font size as a varint of half-points, colours as three bytes, alignments and border
    /// lines as one-byte codes, a border's colour after its line when its code has `0x80`).
    pub fn write(&self, w: &mut Writer) {
        let mut mask = 0;
        for (bit, on) in FLAGS.iter().zip(self.flags()) {
            if on {
                mask |= bit;
            }
        }
        let opt = |present: bool, bit: u64| if present { bit } else { 0 };
        mask |= opt(self.font_size.is_some(), FONT_SIZE)
            | opt(self.color.is_some(), COLOR)
            | opt(self.fill.is_some(), FILL)
            | opt(self.h_align.is_some(), H_ALIGN)
            | opt(self.v_align.is_some(), V_ALIGN);
        for (i, side) in self.border.sides().iter().enumerate() {
            mask |= opt(side.is_some(), BORDER_TOP << i);
        }
        w.varint(mask);
        self.write_fields(w, mask);
    }

    /// The values of the non-flag fields `mask` names.
    fn write_fields(&self, w: &mut Writer, mask: u64) {
        if let (true, Some(f)) = (mask & FONT_SIZE != 0, self.font_size) {
            w.varint(u64::from(f.0));
        }
        for (bit, c) in [(COLOR, self.color), (FILL, self.fill)] {
            if let (true, Some(c)) = (mask & bit != 0, c) {
                write_rgb(w, c);
            }
        }
        if let (true, Some(a)) = (mask & H_ALIGN != 0, self.h_align) {
            w.u8(a.code());
        }
        if let (true, Some(a)) = (mask & V_ALIGN != 0, self.v_align) {
            w.u8(a.code());
        }
        for (i, side) in self.border.sides().iter().enumerate() {
            if let (true, Some(b)) = (mask & (BORDER_TOP << i) != 0, side) {
                w.u8(b.style.code() | if b.color.is_some() { BORDER_COLOR } else { 0 });
                if let Some(c) = b.color {
                    write_rgb(w, c);
                }
            }
        }
    }

    /// Reads what [`Style::write`] wrote.
    pub fn read(r: &mut Reader<'_>) -> Result<Style, CodecError> {
        let mask = r.varint()?;
        if mask & !STYLE_BITS != 0 {
            return Err(CodecError::Invalid(format!(
                "unknown style fields {mask:#x}"
            )));
        }
        let mut s = Style::default();
        for (bit, flag) in FLAGS.iter().zip(s.flags_mut()) {
            *flag = mask & bit != 0;
        }
        s.read_fields(r, mask)?;
        Ok(s)
    }

    fn read_fields(&mut self, r: &mut Reader<'_>, mask: u64) -> Result<(), CodecError> {
        if mask & FONT_SIZE != 0 {
            let half = r.varint_u32(u32::from(FontSize::MAX_HALF_POINTS), "font size")? as u16;
            if half < FontSize::MIN_HALF_POINTS {
                return Err(CodecError::Invalid(format!(
                    "font size of {half} half-points"
                )));
            }
            self.font_size = Some(FontSize(half));
        }
        if mask & COLOR != 0 {
            self.color = Some(read_rgb(r)?);
        }
        if mask & FILL != 0 {
            self.fill = Some(read_rgb(r)?);
        }
        if mask & H_ALIGN != 0 {
            self.h_align = Some(HAlign::from_code(r.u8()?)?);
        }
        if mask & V_ALIGN != 0 {
            self.v_align = Some(VAlign::from_code(r.u8()?)?);
        }
        for i in 0..SIDES.len() {
            if mask & (BORDER_TOP << i) != 0 {
                let code = r.u8()?;
                let style = BorderStyle::from_code(code & !BORDER_COLOR)?;
                let color = if code & BORDER_COLOR != 0 {
                    Some(read_rgb(r)?)
                } else {
                    None
                };
                *self.border.side_mut(i) = Some(Border { style, color });
            }
        }
        Ok(())
    }
}

fn write_rgb(w: &mut Writer, c: Rgb) {
    w.buf.extend_from_slice(&c.0.to_be_bytes()[1..]);
}

fn read_rgb(r: &mut Reader<'_>) -> Result<Rgb, CodecError> {
    let b = r.take(3)?;
    Ok(Rgb((u32::from(b[0]) << 16)
        | (u32::from(b[1]) << 8)
        | u32::from(b[2])))
}

/// `Some(None)` for an explicit JSON `null`, `None` (by `default`) when the field is absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A flag given: `null` clears it as `false` does.
fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Option::<bool>::deserialize(d).map(|v| Some(v.unwrap_or(false)))
}

/// What a `style` entry does to each cell: each field given is set (`null` or `false` clears
/// it); fields left out stay as they were.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StylePatch {
    #[serde(
        default,
        deserialize_with = "flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub bold: Option<bool>,
    #[serde(
        default,
        deserialize_with = "flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub italic: Option<bool>,
    #[serde(
        default,
        deserialize_with = "flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub underline: Option<bool>,
    #[serde(
        default,
        deserialize_with = "flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub strike: Option<bool>,
    #[serde(
        default,
        deserialize_with = "flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub wrap: Option<bool>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub font_size: Option<Option<FontSize>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub color: Option<Option<Rgb>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub fill: Option<Option<Rgb>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub h_align: Option<Option<HAlign>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub v_align: Option<Option<VAlign>>,
    #[serde(default, skip_serializing_if = "BorderPatch::is_empty")]
    pub border: BorderPatch,
    /// The cell's number format (`"0.00%"`; `null` clears it).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub format: Option<Option<String>>,
}

/// The sides a patch sets (`{"style": ...}`) or clears (`null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BorderPatch {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub top: Option<Option<Border>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub right: Option<Option<Border>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub bottom: Option<Option<Border>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub left: Option<Option<Border>>,
}

impl BorderPatch {
    pub fn is_empty(&self) -> bool {
        *self == BorderPatch::default()
    }

    fn sides(&self) -> [Option<Option<Border>>; 4] {
        [self.top, self.right, self.bottom, self.left]
    }

    fn side_mut(&mut self, i: usize) -> &mut Option<Option<Border>> {
        match i {
            0 => &mut self.top,
            1 => &mut self.right,
            2 => &mut self.bottom,
            _ => &mut self.left,
        }
    }
}

impl StylePatch {
    /// The patch that makes any cell's style and format exactly `style` and `format`: every field
    /// given (an undo's inverse of a patch).
    pub fn replacing(style: Option<&Style>, format: Option<&str>) -> StylePatch {
        let d = Style::default();
        let s = style.unwrap_or(&d);
        let b = s.border;
        StylePatch {
            bold: Some(s.bold),
            italic: Some(s.italic),
            underline: Some(s.underline),
            strike: Some(s.strike),
            wrap: Some(s.wrap),
            font_size: Some(s.font_size),
            color: Some(s.color),
            fill: Some(s.fill),
            h_align: Some(s.h_align),
            v_align: Some(s.v_align),
            border: BorderPatch {
                top: Some(b.top),
                right: Some(b.right),
                bottom: Some(b.bottom),
                left: Some(b.left),
            },
            format: Some(format.map(str::to_owned)),
        }
    }

    /// The same patch with only the fields that `other` also names (what an undo of `other`
    /// must put back).
    pub fn restricted_to(&self, other: &StylePatch) -> StylePatch {
        fn keep<T: Copy>(a: Option<T>, b: &Option<impl Sized>) -> Option<T> {
            if b.is_some() { a } else { None }
        }
        let mut border = BorderPatch::default();
        for (i, (mine, theirs)) in self
            .border
            .sides()
            .iter()
            .zip(other.border.sides())
            .enumerate()
        {
            *border.side_mut(i) = keep(*mine, &theirs);
        }
        StylePatch {
            bold: keep(self.bold, &other.bold),
            italic: keep(self.italic, &other.italic),
            underline: keep(self.underline, &other.underline),
            strike: keep(self.strike, &other.strike),
            wrap: keep(self.wrap, &other.wrap),
            font_size: keep(self.font_size, &other.font_size),
            color: keep(self.color, &other.color),
            fill: keep(self.fill, &other.fill),
            h_align: keep(self.h_align, &other.h_align),
            v_align: keep(self.v_align, &other.v_align),
            border,
            format: if other.format.is_some() {
                self.format.clone()
            } else {
                None
            },
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == StylePatch::default()
    }

    /// The rules serde cannot check (the format's length is the entry's to check, as for `set`).
    pub fn validate(&self) -> Result<(), String> {
        if self.is_empty() {
            return Err("names no field to change".into());
        }
        Ok(())
    }

    fn flag_patches(&self) -> [Option<bool>; 5] {
        [
            self.bold,
            self.italic,
            self.underline,
            self.strike,
            self.wrap,
        ]
    }

    /// The style `base` becomes; `None` when that is the default.
    pub fn apply_to_style(&self, base: Option<&Style>) -> Option<Style> {
        let mut s = base.cloned().unwrap_or_default();
        for (flag, p) in s.flags_mut().into_iter().zip(self.flag_patches()) {
            if let Some(v) = p {
                *flag = v;
            }
        }
        if let Some(v) = self.font_size {
            s.font_size = v;
        }
        if let Some(v) = self.color {
            s.color = v;
        }
        if let Some(v) = self.fill {
            s.fill = v;
        }
        if let Some(v) = self.h_align {
            s.h_align = v;
        }
        if let Some(v) = self.v_align {
            s.v_align = v;
        }
        for (i, p) in self.border.sides().iter().enumerate() {
            if let Some(v) = p {
                *s.border.side_mut(i) = *v;
            }
        }
        (!s.is_default()).then_some(s)
    }

    /// The binary form: a mask of the fields set to a value, a mask of those cleared, then the
    /// values in the style form's order, then the format's text when one is set.
    pub fn write(&self, w: &mut Writer) {
        let (mut set, mut clear) = (0, 0);
        for (bit, p) in FLAGS.iter().zip(self.flag_patches()) {
            match p {
                Some(true) => set |= bit,
                Some(false) => clear |= bit,
                None => {}
            }
        }
        let mut field = |bit: u64, p: Option<bool>| match p {
            Some(true) => set |= bit,
            Some(false) => clear |= bit,
            None => {}
        };
        field(FONT_SIZE, self.font_size.map(|v| v.is_some()));
        field(COLOR, self.color.map(|v| v.is_some()));
        field(FILL, self.fill.map(|v| v.is_some()));
        field(H_ALIGN, self.h_align.map(|v| v.is_some()));
        field(V_ALIGN, self.v_align.map(|v| v.is_some()));
        for (i, p) in self.border.sides().iter().enumerate() {
            field(BORDER_TOP << i, p.map(|v| v.is_some()));
        }
        field(FORMAT, self.format.as_ref().map(Option::is_some));
        w.varint(set);
        w.varint(clear);
        // The values set, as a style holding them writes them.
        let values = self.apply_to_style(None).unwrap_or_default();
        values.write_fields(w, set);
        if let Some(Some(f)) = &self.format {
            w.str(f);
        }
    }

    /// Reads what [`StylePatch::write`] wrote.
    pub fn read(r: &mut Reader<'_>) -> Result<StylePatch, CodecError> {
        let set = r.varint()?;
        let clear = r.varint()?;
        if (set | clear) & !(STYLE_BITS | FORMAT) != 0 || set & clear != 0 {
            return Err(CodecError::Invalid(format!(
                "style patch masks {set:#x} and {clear:#x}"
            )));
        }
        let mut values = Style::default();
        values.read_fields(r, set)?;
        let pick = |bit: u64| -> Option<bool> {
            if set & bit != 0 {
                Some(true)
            } else if clear & bit != 0 {
                Some(false)
            } else {
                None
            }
        };
        fn opt<T>(on: Option<bool>, v: Option<T>) -> Option<Option<T>> {
            on.map(|on| if on { v } else { None })
        }
        let mut border = BorderPatch::default();
        for (i, side) in values.border.sides().iter().enumerate() {
            *border.side_mut(i) = opt(pick(BORDER_TOP << i), *side);
        }
        let format = match pick(FORMAT) {
            Some(true) => Some(Some(
                r.str(crate::limits::MAX_FORMAT_BYTES, "format")?.to_owned(),
            )),
            Some(false) => Some(None),
            None => None,
        };
        Ok(StylePatch {
            bold: pick(BOLD),
            italic: pick(ITALIC),
            underline: pick(UNDERLINE),
            strike: pick(STRIKE),
            wrap: pick(WRAP),
            font_size: opt(pick(FONT_SIZE), values.font_size),
            color: opt(pick(COLOR), values.color),
            fill: opt(pick(FILL), values.fill),
            h_align: opt(pick(H_ALIGN), values.h_align),
            v_align: opt(pick(V_ALIGN), values.v_align),
            border,
            format,
        })
    }
}

/// The last style a patch was applied to and what it gave, so a run of cells that shared a style
/// share the patched one too (one allocation per run, not per cell).
#[derive(Debug, Default)]
pub struct StyleMemo {
    last: Option<(SharedStyle, SharedStyle)>,
}

impl StyleMemo {
    /// What `patch` makes of `base`, shared with the last cell's when `base` was its too.
    pub fn patched(&mut self, patch: &StylePatch, base: Option<&Arc<Style>>) -> SharedStyle {
        if let Some((from, to)) = &self.last {
            let same = match (from, base) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            };
            if same {
                return to.clone();
            }
        }
        let to = patch.apply_to_style(base.map(Arc::as_ref)).map(Arc::new);
        self.last = Some((base.cloned(), to.clone()));
        to
    }
}

#[cfg(test)]
#[path = "style_tests.rs"]
pub(crate) mod tests;
