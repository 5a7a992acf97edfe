//! The compiled form of a selector and Java's text for it (`toString` of Java's expression
//! classes), which Java's error messages quote.

use std::fmt;

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Constant {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(String),
}

/// `>`, `>=`, `<`, `<=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OrderOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl OrderOp {
    fn symbol(self) -> &'static str {
        match self {
            OrderOp::Gt => ">",
            OrderOp::Ge => ">=",
            OrderOp::Lt => "<",
            OrderOp::Le => "<=",
        }
    }
}

/// `CONTAINS`, `STARTSWITH`, `ENDSWITH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

/// One node of a compiled selector. `AND` and `OR` chains are flat lists evaluated left to
/// right, which gives exactly the results of Java's left-nested binary nodes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    /// A literal; `keyword` marks TRUE, FALSE and NULL (Java's boolean constants).
    Constant {
        value: Constant,
        keyword: bool,
    },
    /// A message property, by name.
    Property(String),
    /// Unary minus.
    Negate(Box<Expr>),
    /// `NOT`, also `<>` and `IS NOT NULL`.
    Not(Box<Expr>),
    /// A property used where a boolean is wanted.
    BoolCast(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// `=`, also `IS NULL` (against the NULL constant).
    Equal(Box<Expr>, Box<Expr>),
    Order(OrderOp, Box<Expr>, Box<Expr>),
    /// `IN` / `NOT IN` over string literals, sorted and without duplicates.
    In {
        property: String,
        values: Vec<String>,
        /// The literals as written, for Java's text.
        written: Vec<String>,
        not: bool,
    },
    Text {
        op: TextOp,
        not: bool,
        operand: Box<Expr>,
        search: String,
    },
}

impl Expr {
    /// Java's `BooleanExpression`: what may stand where a condition is wanted.
    pub(crate) fn is_boolean(&self) -> bool {
        match self {
            Expr::Constant { keyword, .. } => *keyword,
            Expr::Property(_) | Expr::Negate(_) => false,
            _ => true,
        }
    }
}

/// Java's `Double.toString`, enough for literals: plain between 10^-3 and 10^7, otherwise
/// `d.dddE±n`.
pub(crate) fn java_double_text(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        return format!("{value:?}");
    }
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

impl fmt::Display for Constant {
    /// Java's `Object.toString` of the value (strings bare).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Constant::Null => f.write_str("null"),
            Constant::Bool(value) => write!(f, "{value}"),
            Constant::Int(value) => write!(f, "{value}"),
            Constant::Long(value) => write!(f, "{value}"),
            Constant::Double(value) => f.write_str(&java_double_text(*value)),
            Constant::Str(value) => f.write_str(value),
        }
    }
}

fn write_chain(f: &mut fmt::Formatter<'_>, items: &[Expr], symbol: &str) -> fmt::Result {
    let Some((first, rest)) = items.split_first() else {
        return Ok(());
    };
    for _ in rest {
        f.write_str("(")?;
    }
    write!(f, "{first}")?;
    for item in rest {
        write!(f, " {symbol} {item})")?;
    }
    Ok(())
}

impl fmt::Display for Expr {
    /// Java's `toString` of the expression.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Constant { value, .. } => match value {
                Constant::Null => f.write_str("NULL"),
                Constant::Bool(true) => f.write_str("TRUE"),
                Constant::Bool(false) => f.write_str("FALSE"),
                Constant::Str(text) => write!(f, "'{}'", text.replace('\'', "''")),
                other => write!(f, "{other}"),
            },
            Expr::Property(name) => f.write_str(name),
            Expr::Negate(operand) => write!(f, "(- {operand})"),
            Expr::Not(operand) => write!(f, "(NOT {operand})"),
            Expr::BoolCast(operand) => write!(f, "{operand}"),
            Expr::And(items) => write_chain(f, items, "&&"),
            Expr::Or(items) => write_chain(f, items, "||"),
            Expr::Equal(left, right) => write!(f, "({left} == {right})"),
            Expr::Order(op, left, right) => write!(f, "({left} {} {right})", op.symbol()),
            Expr::In {
                property,
                written,
                not,
                ..
            } => {
                let symbol = if *not { "NOT IN" } else { "IN" };
                write!(f, "{property} {symbol} ( {} )", written.join(", "))
            }
            Expr::Text {
                op, not, operand, ..
            } => {
                let name = match op {
                    TextOp::Contains => "CONTAINS",
                    TextOp::StartsWith => "STARTSWITH",
                    TextOp::EndsWith => "ENDSWITH",
                };
                let not = if *not { "NOT " } else { "" };
                write!(f, "({not}{name} {operand})")
            }
        }
    }
}
