//! Recursive descent over Java's grammar (`SelectorParser.jj`), building the compiled
//! expression with Java's compile-time checks (`ComparisonExpression.create*`,
//! `asBooleanExpression`, `ConstantExpression.createFromDecimal` / `createFloat`).
//!
//! Like Java's parser, it stops after one complete expression: the token after it must be
//! readable, anything further is not looked at.

use super::ast::{Constant, Expr, OrderOp, TextOp};
use super::eval::{compare_values, Value};
use super::lexer::{Kind, Lexer, Token};
use super::{SqlError, IN_LIST_MAX, NESTING_DEPTH_MAX};

/// An expression and how deep its tree is.
struct Node {
    expr: Expr,
    depth: usize,
}

pub(crate) struct Parser<'s> {
    lexer: Lexer<'s>,
    ahead: Vec<Token<'s>>,
    /// How many grammar rules are open (parentheses and prefix operators nest them).
    open: usize,
}

impl<'s> Parser<'s> {
    pub(crate) fn new(text: &'s str) -> Parser<'s> {
        Parser {
            lexer: Lexer::new(text),
            ahead: Vec::new(),
            open: 0,
        }
    }

    /// The whole selector: one OR expression, which must be a condition.
    pub(crate) fn selector(&mut self) -> Result<Expr, SqlError> {
        let node = self.or()?;
        let at = self.peek()?;
        Ok(as_boolean(node, at)?.expr)
    }

    fn peek_nth(&mut self, n: usize) -> Result<Token<'s>, SqlError> {
        while self.ahead.len() <= n {
            let token = self.lexer.next_token()?;
            self.ahead.push(token);
        }
        Ok(self.ahead[n])
    }

    fn peek(&mut self) -> Result<Token<'s>, SqlError> {
        self.peek_nth(0)
    }

    fn advance(&mut self) -> Result<Token<'s>, SqlError> {
        let token = self.peek()?;
        self.ahead.remove(0);
        Ok(token)
    }

    fn expect(&mut self, kind: Kind) -> Result<Token<'s>, SqlError> {
        let token = self.peek()?;
        if token.kind == kind {
            self.advance()
        } else {
            Err(unexpected(token))
        }
    }

    fn enter(&mut self) -> Result<(), SqlError> {
        self.open += 1;
        if self.open > NESTING_DEPTH_MAX {
            let token = self.peek()?;
            return Err(SqlError::TooDeep {
                max: NESTING_DEPTH_MAX,
                line: token.line,
                column: token.column,
            });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Node, SqlError> {
        self.enter()?;
        let mut left = self.and()?;
        while self.peek()?.kind == Kind::Or {
            let at = self.advance()?;
            let right = self.and()?;
            left = chain(left, right, at, true)?;
        }
        self.open -= 1;
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, SqlError> {
        let mut left = self.equality()?;
        while self.peek()?.kind == Kind::And {
            let at = self.advance()?;
            let right = self.equality()?;
            left = chain(left, right, at, false)?;
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Node, SqlError> {
        let mut left = self.comparison()?;
        loop {
            let at = self.peek()?;
            left = match at.kind {
                Kind::Eq | Kind::Ne => {
                    self.advance()?;
                    let right = self.comparison()?;
                    let equal = equal(left, right, at)?;
                    if at.kind == Kind::Ne {
                        wrap(equal, Expr::Not, at)?
                    } else {
                        equal
                    }
                }
                Kind::Is => {
                    self.advance()?;
                    let not = self.peek()?.kind == Kind::Not;
                    if not {
                        self.advance()?;
                    }
                    self.expect(Kind::Null)?;
                    let null = Node {
                        expr: Expr::Constant {
                            value: Constant::Null,
                            keyword: true,
                        },
                        depth: 1,
                    };
                    let is_null = binary(left, null, at, Expr::Equal)?;
                    if not {
                        wrap(is_null, Expr::Not, at)?
                    } else {
                        is_null
                    }
                }
                _ => return Ok(left),
            };
        }
    }

    fn comparison(&mut self) -> Result<Node, SqlError> {
        let mut left = self.unary()?;
        loop {
            let at = self.peek()?;
            let order = match at.kind {
                Kind::Gt => Some(OrderOp::Gt),
                Kind::Ge => Some(OrderOp::Ge),
                Kind::Lt => Some(OrderOp::Lt),
                Kind::Le => Some(OrderOp::Le),
                _ => None,
            };
            if let Some(op) = order {
                self.advance()?;
                let right = self.unary()?;
                left = ordered(op, left, right, at)?;
                continue;
            }
            let not = at.kind == Kind::Not;
            let operator = if not { self.peek_nth(1)? } else { at };
            match operator.kind {
                Kind::Contains | Kind::StartsWith | Kind::EndsWith => {}
                Kind::Between | Kind::In => {}
                _ if not => return Err(unexpected(at)),
                _ => return Ok(left),
            }
            self.advance()?;
            if not {
                self.advance()?;
            }
            left = match operator.kind {
                Kind::Contains => self.text(left, TextOp::Contains, not, at)?,
                Kind::StartsWith => self.text(left, TextOp::StartsWith, not, at)?,
                Kind::EndsWith => self.text(left, TextOp::EndsWith, not, at)?,
                Kind::Between => {
                    let low = self.unary()?;
                    self.expect(Kind::And)?;
                    let high = self.unary()?;
                    between(left, low, high, not, at)?
                }
                _ => self.in_list(left, not, at)?,
            };
        }
    }

    fn text(&mut self, left: Node, op: TextOp, not: bool, at: Token<'s>) -> Result<Node, SqlError> {
        let search = self.string_literal()?;
        wrap(
            left,
            |operand| Expr::Text {
                op,
                not,
                operand,
                search,
            },
            at,
        )
    }

    fn in_list(&mut self, left: Node, not: bool, at: Token<'s>) -> Result<Node, SqlError> {
        self.expect(Kind::Open)?;
        let mut written = vec![self.string_literal()?];
        while self.peek()?.kind == Kind::Comma {
            self.advance()?;
            if written.len() == IN_LIST_MAX {
                let token = self.peek()?;
                return Err(SqlError::InListTooLong {
                    max: IN_LIST_MAX,
                    line: token.line,
                    column: token.column,
                });
            }
            written.push(self.string_literal()?);
        }
        self.expect(Kind::Close)?;
        let Expr::Property(property) = left.expr else {
            return Err(invalid(
                format!("Expected a property for In expression, got: {}", left.expr),
                at,
            ));
        };
        let mut values = written.clone();
        values.sort_unstable();
        values.dedup();
        Ok(Node {
            expr: Expr::In {
                property,
                values,
                written,
                not,
            },
            depth: 2,
        })
    }

    fn string_literal(&mut self) -> Result<String, SqlError> {
        let token = self.expect(Kind::Str)?;
        let inner = &token.text[1..token.text.len() - 1];
        Ok(inner.replace("''", "'"))
    }

    fn unary(&mut self) -> Result<Node, SqlError> {
        let at = self.peek()?;
        match at.kind {
            Kind::Plus | Kind::Minus | Kind::Not => {
                self.enter()?;
                self.advance()?;
                let operand = match self.unary() {
                    // Java takes `+` only when a syntactically whole operand follows
                    // (`LOOKAHEAD("+" unaryExpr())`), else the `+` itself is unexpected.
                    Err(SqlError::Syntax { .. }) if at.kind == Kind::Plus => {
                        return Err(unexpected(at))
                    }
                    other => other?,
                };
                self.open -= 1;
                match at.kind {
                    Kind::Plus => Ok(operand),
                    Kind::Minus => wrap(operand, Expr::Negate, at),
                    _ => wrap(as_boolean(operand, at)?, Expr::Not, at),
                }
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Node, SqlError> {
        let token = self.peek()?;
        let value = match token.kind {
            Kind::Open => {
                self.advance()?;
                let inner = self.or()?;
                self.expect(Kind::Close)?;
                return Ok(inner);
            }
            Kind::Id => {
                self.advance()?;
                return Ok(leaf(Expr::Property(token.text.to_owned())));
            }
            Kind::Str => {
                let text = self.string_literal()?;
                return Ok(leaf(Expr::Constant {
                    value: Constant::Str(text),
                    keyword: false,
                }));
            }
            Kind::True => Constant::Bool(true),
            Kind::False => Constant::Bool(false),
            Kind::Null => Constant::Null,
            Kind::Decimal => decimal(token)?,
            Kind::Float => float(token)?,
            _ => return Err(unexpected(token)),
        };
        self.advance()?;
        let keyword = matches!(token.kind, Kind::True | Kind::False | Kind::Null);
        Ok(leaf(Expr::Constant { value, keyword }))
    }
}

fn leaf(expr: Expr) -> Node {
    Node { expr, depth: 1 }
}

fn deeper(depth: usize, at: Token<'_>) -> Result<usize, SqlError> {
    if depth > NESTING_DEPTH_MAX {
        return Err(SqlError::TooDeep {
            max: NESTING_DEPTH_MAX,
            line: at.line,
            column: at.column,
        });
    }
    Ok(depth)
}

fn wrap(
    operand: Node,
    build: impl FnOnce(Box<Expr>) -> Expr,
    at: Token<'_>,
) -> Result<Node, SqlError> {
    let depth = deeper(operand.depth + 1, at)?;
    Ok(Node {
        expr: build(Box::new(operand.expr)),
        depth,
    })
}

fn binary(
    left: Node,
    right: Node,
    at: Token<'_>,
    build: impl FnOnce(Box<Expr>, Box<Expr>) -> Expr,
) -> Result<Node, SqlError> {
    let depth = deeper(left.depth.max(right.depth) + 1, at)?;
    Ok(Node {
        expr: build(Box::new(left.expr), Box::new(right.expr)),
        depth,
    })
}

/// Appends to a left chain of AND (or OR) conditions, or starts one.
fn chain(left: Node, right: Node, at: Token<'_>, or: bool) -> Result<Node, SqlError> {
    let left = as_boolean(left, at)?;
    let right = as_boolean(right, at)?;
    let same_kind = matches!(
        (&left.expr, or),
        (Expr::Or(_), true) | (Expr::And(_), false)
    );
    let own = if same_kind {
        left.depth
    } else {
        left.depth + 1
    };
    let depth = deeper(own.max(right.depth + 1), at)?;
    let expr = match (left.expr, or) {
        (Expr::Or(mut items), true) | (Expr::And(mut items), false) => {
            items.push(right.expr);
            if or {
                Expr::Or(items)
            } else {
                Expr::And(items)
            }
        }
        (other, true) => Expr::Or(vec![other, right.expr]),
        (other, false) => Expr::And(vec![other, right.expr]),
    };
    Ok(Node { expr, depth })
}

/// Java's `asBooleanExpression`.
fn as_boolean(node: Node, at: Token<'_>) -> Result<Node, SqlError> {
    if node.expr.is_boolean() {
        return Ok(node);
    }
    if matches!(node.expr, Expr::Property(_)) {
        return wrap(node, Expr::BoolCast, at);
    }
    Err(SqlError::NotBoolean {
        expression: node.expr.to_string(),
        line: at.line,
        column: at.column,
    })
}

fn invalid(reason: String, at: Token<'_>) -> SqlError {
    SqlError::Invalid {
        reason,
        line: at.line,
        column: at.column,
    }
}

fn unexpected(token: Token<'_>) -> SqlError {
    SqlError::Syntax {
        token: token.kind.image(),
        text: token.text.to_owned(),
        line: token.line,
        column: token.column,
    }
}

/// Java's `createEqual`: no NULL literal on either side, and a TRUE/FALSE/NULL literal
/// on the left only against another such literal.
fn equal(left: Node, right: Node, at: Token<'_>) -> Result<Node, SqlError> {
    for side in [&left.expr, &right.expr] {
        if matches!(
            side,
            Expr::Constant {
                value: Constant::Null,
                ..
            }
        ) {
            return Err(invalid(format!("'{side}' cannot be compared."), at));
        }
    }
    if let (Expr::Constant { keyword: true, .. }, Expr::Constant { keyword: false, .. }) =
        (&left.expr, &right.expr)
    {
        let reason = format!("'{}' cannot be compared with '{}'", left.expr, right.expr);
        return Err(invalid(reason, at));
    }
    binary(left, right, at, Expr::Equal)
}

/// Java's `checkLessThanOperand`: number literals, properties and arithmetic only.
fn ordered(op: OrderOp, left: Node, right: Node, at: Token<'_>) -> Result<Node, SqlError> {
    for side in [&left.expr, &right.expr] {
        let comparable = match side {
            Expr::Constant { value, .. } => {
                matches!(
                    value,
                    Constant::Int(_) | Constant::Long(_) | Constant::Double(_)
                )
            }
            other => !other.is_boolean(),
        };
        if !comparable {
            return Err(invalid(format!("Value '{side}' cannot be compared."), at));
        }
    }
    binary(left, right, at, |left, right| Expr::Order(op, left, right))
}

/// `BETWEEN` is `>= low AND <= high` (literal bounds must be ordered); `NOT BETWEEN` is
/// `< low OR > high`.
fn between(value: Node, low: Node, high: Node, not: bool, at: Token<'_>) -> Result<Node, SqlError> {
    if not {
        let below = ordered(OrderOp::Lt, clone(&value), low, at)?;
        let above = ordered(OrderOp::Gt, value, high, at)?;
        return chain(below, above, at, true);
    }
    if let (
        Expr::Constant {
            value: low_value, ..
        },
        Expr::Constant {
            value: high_value, ..
        },
    ) = (&low.expr, &high.expr)
    {
        if *low_value == Constant::Null || *high_value == Constant::Null {
            let reason = "Illegal values of between, values can not be null!".to_owned();
            return Err(invalid(reason, at));
        }
        let order = compare_values(&Value::of(high_value), &Value::of(low_value));
        match order {
            Ok(order) if order.is_lt() => {
                let reason = format!(
                    "Illegal values of between, left value({low_value}) must less than or \
                     equal to right value({high_value})"
                );
                return Err(invalid(reason, at));
            }
            Ok(_) => {}
            Err(fault) => return Err(invalid(fault.java_text(), at)),
        }
    }
    let lower = ordered(OrderOp::Ge, clone(&value), low, at)?;
    let upper = ordered(OrderOp::Le, value, high, at)?;
    chain(lower, upper, at, false)
}

fn clone(node: &Node) -> Node {
    Node {
        expr: node.expr.clone(),
        depth: node.depth,
    }
}

/// Java's `createFromDecimal`: an `L` suffix is dropped; int when it fits, else long.
fn decimal(token: Token<'_>) -> Result<Constant, SqlError> {
    let digits = token.text.trim_end_matches(['l', 'L']);
    let Ok(value) = digits.parse::<i64>() else {
        return Err(SqlError::NumberFormat {
            input: digits.to_owned(),
            line: token.line,
            column: token.column,
        });
    };
    Ok(i32::try_from(value).map_or(Constant::Long(value), Constant::Int))
}

/// Java's `createFloat`: finite and at least the smallest positive double (so `0.0` is
/// refused, as in Java).
fn float(token: Token<'_>) -> Result<Constant, SqlError> {
    let Ok(value) = token.text.parse::<f64>() else {
        return Err(SqlError::NumberFormat {
            input: token.text.to_owned(),
            line: token.line,
            column: token.column,
        });
    };
    if value.is_infinite() {
        let reason = format!("{} is greater than 1.7976931348623157E308", token.text);
        return Err(invalid(reason, token));
    }
    if value < f64::from_bits(1) {
        return Err(invalid(
            format!("{} is less than 4.9E-324", token.text),
            token,
        ));
    }
    Ok(Constant::Double(value))
}
