//! Evaluation of a compiled selector against one message's properties, with Java's
//! three-valued logic and type rules (`ComparisonExpression`, `LogicExpression`,
//! `UnaryExpression`): property values are strings, converted to the type of the literal
//! they meet; a missing property is NULL; anything Java would throw on counts as no match.

use std::cmp::Ordering;

use super::ast::{Constant, Expr, OrderOp, TextOp};

/// A value during evaluation; strings borrow from the selector or the message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

impl<'a> Value<'a> {
    pub(crate) fn of(constant: &'a Constant) -> Value<'a> {
        match constant {
            Constant::Null => Value::Null,
            Constant::Bool(value) => Value::Bool(*value),
            Constant::Int(value) => Value::Int(*value),
            Constant::Long(value) => Value::Long(*value),
            Constant::Double(value) => Value::Double(*value),
            Constant::Str(value) => Value::Str(value),
        }
    }
}

/// What Java would throw; the whole evaluation then gives no match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A string that is not a number of the type it is compared with.
    NumberFormat(String),
    /// A boolean compared with a string, or a non-boolean where one is needed.
    ClassCast,
}

impl Fault {
    /// The text of Java's exception.
    pub(crate) fn java_text(&self) -> String {
        match self {
            Fault::NumberFormat(input) => {
                format!("java.lang.NumberFormatException: For input string: \"{input}\"")
            }
            Fault::ClassCast => "java.lang.ClassCastException".to_owned(),
        }
    }
}

/// Evaluates `expr`; `property` looks a message property up by name.
pub(crate) fn evaluate<'a, F>(expr: &'a Expr, property: &F) -> Result<Value<'a>, Fault>
where
    F: Fn(&str) -> Option<&'a str>,
{
    Ok(match expr {
        Expr::Constant { value, .. } => Value::of(value),
        Expr::Property(name) => property(name).map_or(Value::Null, Value::Str),
        Expr::Negate(operand) => match evaluate(operand, property)? {
            Value::Int(value) => Value::Int(value.wrapping_neg()),
            Value::Long(value) => Value::Long(value.wrapping_neg()),
            Value::Double(value) => Value::Double(-value),
            _ => Value::Null,
        },
        Expr::Not(operand) => match condition(operand, property)? {
            Some(value) => Value::Bool(!value),
            None => Value::Null,
        },
        Expr::BoolCast(operand) => match evaluate(operand, property)? {
            Value::Null => Value::Null,
            Value::Bool(value) => Value::Bool(value),
            _ => Value::Bool(false),
        },
        Expr::And(items) => logic(items, property, false)?,
        Expr::Or(items) => logic(items, property, true)?,
        Expr::Equal(left, right) => {
            let left = evaluate(left, property)?;
            let right = evaluate(right, property)?;
            match (left, right) {
                (Value::Null, Value::Null) => Value::Bool(true),
                // Java's asymmetry: a NULL on the left is unknown, on the right false.
                (Value::Null, _) => Value::Null,
                (_, Value::Null) => Value::Bool(false),
                (left, right) => Value::Bool(compare_values(&left, &right)?.is_eq()),
            }
        }
        Expr::Order(op, left, right) => {
            let left = evaluate(left, property)?;
            if left == Value::Null {
                return Ok(Value::Null);
            }
            let right = evaluate(right, property)?;
            if right == Value::Null {
                return Ok(Value::Null);
            }
            let order = match (left, right) {
                // Two strings are compared as numbers or not at all.
                (Value::Str(left), Value::Str(right)) => {
                    double_order(java_double(left)?, java_double(right)?)
                }
                (left, right) => compare_values(&left, &right)?,
            };
            Value::Bool(match op {
                OrderOp::Gt => order.is_gt(),
                OrderOp::Ge => order.is_ge(),
                OrderOp::Lt => order.is_lt(),
                OrderOp::Le => order.is_le(),
            })
        }
        Expr::In {
            property: name,
            values,
            not,
            ..
        } => match property(name) {
            None => Value::Null,
            Some(value) => {
                let found = values
                    .binary_search_by(|candidate| candidate.as_str().cmp(value))
                    .is_ok();
                Value::Bool(found != *not)
            }
        },
        Expr::Text {
            op,
            not,
            operand,
            search,
        } => {
            if search.is_empty() {
                return Ok(Value::Bool(false));
            }
            let Value::Str(text) = evaluate(operand, property)? else {
                return Ok(Value::Bool(false));
            };
            let found = match op {
                TextOp::Contains => text.contains(search.as_str()),
                TextOp::StartsWith => text.starts_with(search.as_str()),
                TextOp::EndsWith => text.ends_with(search.as_str()),
            };
            Value::Bool(found != *not)
        }
    })
}

/// A condition's value: true, false or unknown (`None`).
fn condition<'a, F>(expr: &'a Expr, property: &F) -> Result<Option<bool>, Fault>
where
    F: Fn(&str) -> Option<&'a str>,
{
    match evaluate(expr, property)? {
        Value::Bool(value) => Ok(Some(value)),
        Value::Null => Ok(None),
        _ => Err(Fault::ClassCast),
    }
}

/// A left-to-right AND (`or` false) or OR chain: stops at the first deciding value, and
/// is unknown when no item decides and one is unknown.
fn logic<'a, F>(items: &'a [Expr], property: &F, or: bool) -> Result<Value<'a>, Fault>
where
    F: Fn(&str) -> Option<&'a str>,
{
    let mut unknown = false;
    for item in items {
        match condition(item, property)? {
            Some(value) if value == or => return Ok(Value::Bool(or)),
            Some(_) => {}
            None => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(!or)
    })
}

/// Java's `Double.compareTo`: NaN above everything and equal to itself, -0.0 below 0.0.
fn double_order(left: f64, right: f64) -> Ordering {
    match (left.is_nan(), right.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => left.total_cmp(&right),
    }
}

/// Java's `String.trim`.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= '\u{20}')
}

/// Java's `Double.valueOf` for decimal text: surrounding blanks, a sign, `NaN`,
/// `Infinity`, and an `f`/`d` suffix are accepted (hexadecimal forms are not).
pub(crate) fn java_double(text: &str) -> Result<f64, Fault> {
    let fault = || Fault::NumberFormat(text.to_owned());
    let trimmed = java_trim(text);
    let (negative, body) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let magnitude = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let number = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
            let shape_ok = number
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit() || b == b'.')
                && number
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
            if !shape_ok {
                return Err(fault());
            }
            number.parse::<f64>().map_err(|_| fault())?
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// Java's `Integer.valueOf` / `Long.valueOf`: an optional sign and decimal digits.
fn java_integer<T: std::str::FromStr>(text: &str) -> Result<T, Fault> {
    text.parse::<T>()
        .map_err(|_| Fault::NumberFormat(text.to_owned()))
}

/// Java's `Boolean.valueOf`.
fn java_bool(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

/// Java's `ComparisonExpression.__compare` with string conversion on: values of different
/// types are brought to the wider number type, or the string side is parsed as the other
/// side's type; a boolean against a number is "less" (-1), as in Java.
pub(crate) fn compare_values(left: &Value<'_>, right: &Value<'_>) -> Result<Ordering, Fault> {
    use Value::{Bool, Double, Int, Long, Str};
    Ok(match (*left, *right) {
        (Bool(l), Bool(r)) => l.cmp(&r),
        (Int(l), Int(r)) => l.cmp(&r),
        (Long(l), Long(r)) => l.cmp(&r),
        (Double(l), Double(r)) => double_order(l, r),
        (Str(l), Str(r)) => l.encode_utf16().cmp(r.encode_utf16()),
        (Bool(_), Str(_)) => return Err(Fault::ClassCast),
        (Bool(_), _) => Ordering::Less,
        (Int(l), Long(r)) => i64::from(l).cmp(&r),
        (Long(l), Int(r)) => l.cmp(&i64::from(r)),
        (Int(l), Double(r)) => double_order(f64::from(l), r),
        (Double(l), Int(r)) => double_order(l, f64::from(r)),
        // Java widens long to double here too.
        #[allow(clippy::cast_precision_loss)]
        (Long(l), Double(r)) => double_order(l as f64, r),
        #[allow(clippy::cast_precision_loss)]
        (Double(l), Long(r)) => double_order(l, r as f64),
        (Int(l), Str(r)) => l.cmp(&java_integer::<i32>(r)?),
        (Long(l), Str(r)) => l.cmp(&java_integer::<i64>(r)?),
        (Double(l), Str(r)) => double_order(l, java_double(r)?),
        (Str(l), Bool(r)) => java_bool(l).cmp(&r),
        (Str(l), Int(r)) => java_integer::<i32>(l)?.cmp(&r),
        (Str(l), Long(r)) => java_integer::<i64>(l)?.cmp(&r),
        (Str(l), Double(r)) => double_order(java_double(l)?, r),
        (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
        (Value::Null, _) | (_, Value::Null) => Ordering::Less,
    })
}
